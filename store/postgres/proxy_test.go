package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runseal/runseal/internal/pgcut"
)

// The commit-cutting proxy lives in internal/pgcut, which other packages'
// tests use too.
const (
	cutAfter  = pgcut.CutAfter
	cutBefore = pgcut.CutBefore
)

func newCommitCutter(t *testing.T, cfg *pgxpool.Config) (*pgcut.Cutter, *pgxpool.Config) {
	return pgcut.New(t, cfg)
}
