package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
)

// pageCacheConn takes a read connection of its own from the pool and turns
// its memory map off until release, for a pass over the whole file (an
// export, verify --all). Through the pool's map every page such a pass
// touched would stay resident in the process (a journal of a million runs:
// a gigabyte of RSS); through the pager's own small cache each page costs
// a copy, and the pass holds at most the cache. release gives the
// connection its map back (SQLite maps the file afresh, nothing resident)
// before it returns to the pool, or drops it from the pool if it cannot.
func (s *Store) pageCacheConn(ctx context.Context) (conn *sql.Conn, release func(), err error) {
	conn, err = s.rdb.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	var mmap int64
	if err := conn.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&mmap); err != nil {
		conn.Close()
		return nil, nil, err
	}
	if mmap <= 0 {
		return conn, func() { conn.Close() }, nil
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA mmap_size = 0`); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA mmap_size = %d`, mmap)); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool without its map
		}
		conn.Close()
	}, nil
}
