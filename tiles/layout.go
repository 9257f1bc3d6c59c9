package tiles

// levelWidth is the number of hashes at tile level l in a tree of size
// leaves: floor(size / 256^l), the count of complete subtrees of 256^l
// leaves.
func levelWidth(size uint64, l int) uint64 {
	if l < 0 {
		l = 0 // entry bundles count leaves, as level 0 does
	}
	if 8*l >= 64 {
		return 0
	}
	return size >> (8 * uint(l))
}

// Implied reports whether a checkpoint of size implies the tile r:
// a full tile whose hashes are all complete at size, or a partial tile of
// width W that the layout had at some size up to this one (C2SP: logs serve
// the partial tiles of every size they checkpointed). Partial tiles of a
// size whose full tile already exists are still implied: their content
// never changes.
func Implied(r Ref, size uint64) bool {
	if r.W < 1 || r.W > Width || r.Level < EntriesLevel || r.Level > MaxLevel {
		return false
	}
	n := levelWidth(size, r.Level)
	hi := r.Index*Width + uint64(r.W)
	if r.Index > (^uint64(0)-uint64(r.W))/Width {
		return false // overflow: far beyond any log
	}
	return hi <= n
}

// Edge returns the width of the tile at level l and index r.Index that a
// checkpoint of size implies exactly: Width for a tile complete at size,
// the partial width for the rightmost one, 0 for one beyond the log.
func Edge(level int, index, size uint64) int {
	n := levelWidth(size, level)
	if index >= n/Width {
		if index == n/Width {
			return int(n % Width)
		}
		return 0
	}
	return Width
}

// Levels returns the number of hash tile levels that a tree of size has:
// the levels with at least one hash.
func Levels(size uint64) int {
	l := 0
	for levelWidth(size, l) > 0 {
		l++
	}
	return l
}

// Refs returns every tile and bundle a checkpoint of size implies with
// the width it has at size, from index first (per level, in that level's
// own index units) onwards: the resources a directory needs. Level by
// level, bundles first, lowest index first.
func Refs(size uint64, from uint64) []Ref {
	var out []Ref
	add := func(level int) {
		n := levelWidth(size, level)
		start := levelWidth(from, level) / Width
		for i := start; i*Width < n; i++ {
			w := Width
			if rem := n - i*Width; rem < Width {
				w = int(rem)
			}
			out = append(out, Ref{Level: level, Index: i, W: w})
		}
	}
	add(EntriesLevel)
	for l := 0; l < Levels(size); l++ {
		add(l)
	}
	return out
}
