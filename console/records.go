package console

import (
	"fmt"

	"github.com/runseal/runseal/internal/canon"
	"github.com/runseal/runseal/store"
	"github.com/runseal/runseal/store/sealed"
)

// Field states on the Run page.
const (
	fieldClear  = "clear"
	fieldSealed = "sealed" // an envelope: shown as sealed, never opened here
	fieldErased = "erased" // an envelope whose scope's key was erased
)

// fieldView is one of a record's own fields as stored.
type fieldView struct {
	Name  string
	State string
	Value string // the stored JSON value when clear; "" when sealed or erased
}

// recordView is one record as the Run page shows it: its place in the
// chain, its routing fields and its own fields as stored.
type recordView struct {
	store.Record
	Fields []fieldView
	Raw    string
	Bad    string // the stored bytes did not decode: why
}

// recordViews shows records as stored (their Raw bytes), and opens
// nothing. A sealed field is shown as sealed, or as erased when erased
// says its scope's key was erased (sealed.Scope names the scope: the
// record's case, else its run, in tenant); an error of erased (a scope
// the key ring never had, say) is the page's. Plaintext is never made,
// let alone shown: the console shows what the journal holds, as the
// records API does.
func recordViews(recs []store.Record, tenant string, erased func(scope string) (bool, error)) ([]recordView, error) {
	out := make([]recordView, len(recs))
	for i, r := range recs {
		v := recordView{Record: r, Raw: string(r.Raw)}
		b, err := store.DecodeBody(r.Raw)
		if err != nil {
			v.Bad = err.Error()
			out[i] = v
			continue
		}
		stored, err := canon.Parse(b.Fields)
		if err != nil {
			v.Bad = err.Error()
			out[i] = v
			continue
		}
		for _, m := range stored.Members {
			f := fieldView{Name: m.Key, State: fieldClear}
			if sealed.Seals(b.Kind, m.Key) && m.Value.Kind == canon.String && sealed.IsEnvelope(m.Value.Str) {
				f.State = fieldSealed
				gone, err := erased(sealed.Scope(tenant, b.Case, b.Run))
				if err != nil {
					return nil, fmt.Errorf("run %s seq %d field %q: %w", b.Run, b.Seq, m.Key, err)
				}
				if gone {
					f.State = fieldErased
				}
			} else {
				f.Value = string(m.Value.Marshal())
			}
			v.Fields = append(v.Fields, f)
		}
		out[i] = v
	}
	return out, nil
}
