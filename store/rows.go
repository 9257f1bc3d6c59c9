package store

// Rows is the part of a query's result set that mapping rows to values
// needs. Both backends' rows (database/sql's *Rows and pgx's Rows) have
// it, so the mapping from a row to a value is written once, here, while
// each backend keeps its own SQL.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CollectRows maps every remaining row with scan, in order, and returns a
// non-nil slice (empty for no rows). It stops at the first error; it does
// not close rows.
func CollectRows[T any](rows Rows, scan func(Rows) (T, error)) ([]T, error) {
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ScanActivity maps a row of (run id, activity time in Unix nanoseconds)
// to an Activity, parsing the id with the backend's parseRun. A negative
// time is corruption: it would wrap to a time far in the future.
func ScanActivity(row Rows, parseRun func(string) (RunID, error)) (Activity, error) {
	var id string
	var at int64
	if err := row.Scan(&id, &at); err != nil {
		return Activity{}, err
	}
	r, err := parseRun(id)
	if err != nil {
		return Activity{}, err
	}
	if at < 0 {
		return Activity{}, &CorruptError{Run: r, Detail: "negative activity time"}
	}
	return Activity{Run: r, At: uint64(at)}, nil
}

// CollectCosignatures reads (witness, lines) rows into the map
// PublicationStore.Cosignatures returns: each witness's cosignature lines.
// It does not close rows.
func CollectCosignatures(rows Rows) (map[string][]byte, error) {
	out := make(map[string][]byte)
	for rows.Next() {
		var w string
		var lines []byte
		if err := rows.Scan(&w, &lines); err != nil {
			return nil, err
		}
		out[w] = lines
	}
	return out, rows.Err()
}
