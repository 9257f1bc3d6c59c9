package tiles

import (
	"errors"
	"fmt"
	"path/filepath"
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
	// ErrOutside: a symbolic link inside the directory Sync writes leads
	// out of it; Sync writes nothing through it.
	ErrOutside = errors.New("tiles: a symbolic link leads out of the directory")
)

// OutsideError names the symbolic link in a directory Sync writes that
// leads out of it, and where it points. It unwraps to ErrOutside and to
// the refusal of the os.Root the directory is reached through.
type OutsideError struct {
	Dir    string // the directory Sync writes, as named
	Link   string // the link, relative to Dir
	Target string // what the link points to
	Err    error  // the refused access
}

func (e *OutsideError) Error() string {
	return fmt.Sprintf("tiles: sync: %s is a symbolic link to %s, which leads out of %s; nothing is written through it (replace it with a directory or file of its own): %v",
		filepath.Join(e.Dir, e.Link), e.Target, e.Dir, e.Err)
}

// Unwrap leads to ErrOutside and to the refused access.
func (e *OutsideError) Unwrap() []error { return []error{ErrOutside, e.Err} }
