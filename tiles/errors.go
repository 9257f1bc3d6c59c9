package tiles

import (
	"errors"
	"fmt"
)

// Sentinel errors: the classes a caller branches on with errors.Is.
var (
	// ErrNotFound: the resource is not part of the layout at the newest
	// checkpoint (a tile beyond the log, or a width it does not imply).
	ErrNotFound = errors.New("tiles: not found")
	// ErrMalformed: bytes or a path that are not in the tlog-tiles format
	// (wrong length, bad encoding).
	ErrMalformed = errors.New("tiles: malformed")
	// ErrMismatch: well-formed data whose hashes do not lead to the signed
	// root: the tile, the bundle or the root is wrong.
	ErrMismatch = errors.New("tiles: hashes do not lead to the signed root")
	// ErrNoCheckpoint: the log has no signed checkpoint to publish yet.
	ErrNoCheckpoint = errors.New("tiles: no signed checkpoint")
)

// TileError names the resource at fault: which tile or bundle, and why.
// It unwraps to ErrNotFound, ErrMalformed or ErrMismatch.
type TileError struct {
	Path   string // the resource's path under the prefix, e.g. "tile/0/x001/234.p/7"
	Detail string
	Err    error // the class
}

func (e *TileError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Err.Error(), e.Path, e.Detail)
}

func (e *TileError) Unwrap() error { return e.Err }

func tileErr(class error, path, format string, args ...any) error {
	return &TileError{Path: path, Detail: fmt.Sprintf(format, args...), Err: class}
}

// More sentinels, for Sync.
var (
	// ErrBusy: another sync holds the directory's lock.
	ErrBusy = errors.New("tiles: directory busy")
	// ErrDiverged: the directory holds a checkpoint that is not of this
	// log (another origin, a larger size, or another root at its size);
	// Sync refuses to overwrite a published layout with another log's.
	ErrDiverged = errors.New("tiles: directory holds another log's checkpoint")
)
