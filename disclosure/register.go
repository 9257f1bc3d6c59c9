package disclosure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/mod/sumdb/note"

	"github.com/runseal/runseal/checkpoint"
	"github.com/runseal/runseal/store"
)

// Request is one act of disclosure: what to give, against which witnessed
// checkpoint, to whom, by whom.
type Request struct {
	Selection  Selection
	Checkpoint *checkpoint.Signed // verified by the caller against the log key and witness policy
	Recipient  string
	By         store.Operator
	// Key is the journal's disclosure key: it signs the package's statement
	// and MUST NOT be the log's checkpoint key.
	Key note.Signer
	// Now stamps the act; time.Now when nil.
	Now func() time.Time
}

// Disclose writes a disclosure package to the file dest and records the act
// in reg, in this order, so that no package reaches dest unrecorded:
//
//  1. dest's directory must exist and dest must not: a disclosure never
//     replaces a file;
//  2. the package is written to a private staging file beside dest
//     (".<name>.<id>.partial", created new, mode 0600) and fsynced;
//  3. the act (who, which runs and cases, recipient, checkpoint, SHA-256
//     and length of the package) is recorded in reg;
//  4. only then is the file moved into place (a hard link, which refuses
//     to replace an existing file, then removal of the staging name; a plain
//     rename where links are not supported), and the directory fsynced.
//
// On failure before step 4 the staging file is removed and nothing is
// recorded or delivered. A failure in step 4 returns *UndeliveredError
// holding the recorded act: the register then says more was disclosed than
// was, never less.
func Disclose(ctx context.Context, j Source, reg store.DisclosureRegister, dest string, req Request) (store.Disclosure, error) {
	if err := req.By.Validate(); err != nil {
		return store.Disclosure{}, err
	}
	if err := store.ValidateRecipient(req.Recipient); err != nil {
		return store.Disclosure{}, err
	}
	if reg == nil {
		return store.Disclosure{}, errors.New("disclose: no register to record the act in")
	}
	dest = filepath.Clean(dest)
	dir, name := filepath.Dir(dest), filepath.Base(dest)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return store.Disclosure{}, fmt.Errorf("disclose: %s is not a directory", dir)
	}
	if _, err := os.Lstat(dest); err == nil {
		return store.Disclosure{}, fmt.Errorf("disclose: %s already exists; a disclosure never replaces a file", dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return store.Disclosure{}, fmt.Errorf("disclose: %w", err)
	}
	now := time.Now
	if req.Now != nil {
		now = req.Now
	}
	at := now().UTC()
	id := "dsc_" + ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String()
	staging := filepath.Join(dir, "."+name+"."+id+".partial")
	f, err := os.OpenFile(staging, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return store.Disclosure{}, fmt.Errorf("disclose: %w", err)
	}
	delivered := false
	defer func() {
		if !delivered {
			os.Remove(staging)
		}
	}()
	sum, err := WritePackage(ctx, j, f, req.Selection, req.Checkpoint, Signing{Recipient: req.Recipient, Key: req.Key})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return store.Disclosure{}, fmt.Errorf("disclose: %w", err)
	}
	sel, _ := req.Selection.normalize() // WritePackage accepted it
	act := store.Disclosure{
		ID: id, At: at, By: req.By, Recipient: req.Recipient,
		Runs: sel.Runs, Cases: sel.Cases, Checkpoint: sum.Checkpoint,
		Package: sum.SHA256, Bytes: sum.Bytes, Carried: sum.Runs, Sealed: sum.Sealed, Records: sum.Records,
		SignedBy: sum.StatementKey,
	}
	if act.Runs == nil {
		act.Runs = []store.RunID{}
	}
	if act.Cases == nil {
		act.Cases = []store.CaseID{}
	}
	if err := reg.RecordDisclosure(ctx, act); err != nil {
		return store.Disclosure{}, fmt.Errorf("disclose: recording the act: %w", err)
	}
	if err := moveIntoPlace(staging, dest); err != nil {
		return act, &UndeliveredError{Act: act, Err: err}
	}
	delivered = true
	if err := syncDir(dir); err != nil {
		return act, &UndeliveredError{Act: act, Err: fmt.Errorf("the package is in place but its directory entry may not be durable: %w", err)}
	}
	return act, nil
}

// moveIntoPlace gives staging the name dest without ever replacing a file
// at dest: link(2) fails if dest exists, where rename(2) would not.
func moveIntoPlace(staging, dest string) error {
	err := os.Link(staging, dest)
	if err == nil {
		return os.Remove(staging)
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while the package was written; it was not replaced", dest)
	}
	// No hard links here (some file systems): check, then rename.
	if _, lerr := os.Lstat(dest); lerr == nil {
		return fmt.Errorf("%s appeared while the package was written; it was not replaced", dest)
	}
	return os.Rename(staging, dest)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
