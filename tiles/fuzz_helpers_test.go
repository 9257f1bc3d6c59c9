package tiles

import (
	"fmt"
	"io/fs"

	"github.com/runseal/runseal/log"
)

var errNotExistForTest = fmt.Errorf("test: %w", fs.ErrNotExist)

func verifies(leaf log.Hash, i, size uint64, p []log.Hash, root log.Hash) bool {
	return log.VerifyInclusion(leaf, i, size, p, root) == nil
}
