package checkpoint

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Limits on policies. C2SP tlog-policy asks implementations to support at
// least 32 of each.
const (
	maxPolicyLen     = 1 << 20
	maxPolicyEntries = 256 // per kind: logs, witnesses, groups
)

// A Witness is a witness named in a Policy.
type Witness struct {
	Name     string               // the name the policy gives it; meaningful only inside the policy
	Verifier *CosignatureVerifier // its cosignature/v1 key
	URL      string               // its submission prefix, if the policy gives one
}

// policyLog is a log line of a policy.
type policyLog struct {
	verifier note.Verifier
	vkey     string
	url      string
}

// A member is a witness or a group referred to by a group or the quorum.
type member struct {
	group bool
	index int // into Policy.witnesses or Policy.groups
}

type group struct {
	name    string
	k       int
	members []member
}

// A Policy decides whether a checkpoint has been witnessed enough: which
// witness keys count, and how many of them must have cosigned (a quorum,
// k of n witnesses, or nested k-of-n groups as in C2SP tlog-policy).
// It may also list the log keys a checkpoint must be signed with.
//
// A Policy is immutable and safe for concurrent use. Make one with
// NewThresholdPolicy, ParsePolicy or LoadPolicy; the zero Policy refuses to
// evaluate anything, so a forgotten initialisation cannot mean "no witness
// needed".
type Policy struct {
	logs      []policyLog
	witnesses []Witness
	groups    []group
	quorum    *member // nil means "quorum none": no cosignature required
	byKey     map[nameHash]int
	built     bool // set by the constructors
}

// errZeroPolicy is returned by the zero Policy.
var errZeroPolicy = fmt.Errorf("%w: Policy not made by NewThresholdPolicy or ParsePolicy", ErrMalformedPolicy)

// NewThresholdPolicy returns the policy "at least k of these witnesses",
// with 1 <= k <= len(witnesses). Each witness is named by its key name in
// the policy, so key names must be distinct, and no two witnesses may share
// a public key (one key would then count twice).
func NewThresholdPolicy(k int, witnesses ...*CosignatureVerifier) (*Policy, error) {
	n := len(witnesses)
	if n == 0 || k < 1 || k > n {
		return nil, fmt.Errorf("%w: threshold %d of %d witnesses, want 1 <= k <= n", ErrMalformedPolicy, k, n)
	}
	if n > maxPolicyEntries {
		return nil, fmt.Errorf("%w: %d witnesses, more than %d", ErrMalformedPolicy, n, maxPolicyEntries)
	}
	b := newPolicyBuilder()
	g := group{k: k}
	for _, v := range witnesses {
		if v == nil {
			return nil, fmt.Errorf("%w: nil witness verifier", ErrMalformedPolicy)
		}
		if err := b.addWitness(v.Name(), v, ""); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrMalformedPolicy, err)
		}
		g.members = append(g.members, member{index: len(b.p.witnesses) - 1})
	}
	// The group needs a name for MarshalText; make one no witness has.
	g.name = fmt.Sprintf("%d-of-%d", k, n)
	for b.names[g.name] != nil {
		g.name += "-group"
	}
	b.p.groups = append(b.p.groups, g)
	b.p.quorum = &member{group: true, index: 0}
	return b.p, nil
}

// policyBuilder accumulates a policy and the checks that span lines.
type policyBuilder struct {
	p     *Policy
	names map[string]*member
	keys  map[string]string // Ed25519 public key → who uses it, to refuse reuse
}

func newPolicyBuilder() *policyBuilder {
	return &policyBuilder{
		p:     &Policy{byKey: make(map[nameHash]int), built: true},
		names: make(map[string]*member),
		keys:  make(map[string]string),
	}
}

func (b *policyBuilder) useKey(pub []byte, who string) error {
	if prev, ok := b.keys[string(pub)]; ok {
		return fmt.Errorf("%s uses the same public key as %s", who, prev)
	}
	b.keys[string(pub)] = who
	return nil
}

func (b *policyBuilder) addWitness(name string, v *CosignatureVerifier, url string) error {
	if name == "none" {
		return fmt.Errorf(`"none" is reserved and cannot name a witness`)
	}
	if b.names[name] != nil {
		return fmt.Errorf("name %q defined twice", name)
	}
	if len(b.p.witnesses) == maxPolicyEntries {
		return fmt.Errorf("more than %d witnesses", maxPolicyEntries)
	}
	k := nameHash{v.Name(), v.KeyHash()}
	if _, ok := b.p.byKey[k]; ok {
		return fmt.Errorf("two witnesses have key name and ID %s+%08x", k.name, k.hash)
	}
	if err := b.useKey(v.pub, "witness "+strconv.Quote(name)); err != nil {
		return err
	}
	b.p.byKey[k] = len(b.p.witnesses)
	b.names[name] = &member{index: len(b.p.witnesses)}
	b.p.witnesses = append(b.p.witnesses, Witness{Name: name, Verifier: v, URL: url})
	return nil
}

// ParsePolicy parses a witness policy in the C2SP tlog-policy format:
//
//	# comment
//	log <vkey> [<url>]
//	witness <name> <vkey> [<url>]
//	group <name> all|any|<k> <name>...
//	quorum <name>|none
//
// Fields are separated by spaces and tabs; blank lines and lines whose first
// non-blank character is '#' are ignored. A log vkey must be a plain Ed25519
// key (type 0x01) whose name is the log's origin; a witness vkey must be a
// cosignature/v1 key (type 0x04). A group or the quorum may name only
// witnesses and groups defined on earlier lines, a group lists each member
// at most once, 1 <= k <= n, and there is exactly one quorum line.
//
// Two choices are stricter than the specification: no public key may appear
// twice in the whole file, log lines included, because a log that is also
// its own witness proves nothing; and only key types 0x01 (logs) and 0x04
// (witnesses) are supported, so a policy naming an ML-DSA-44 witness is
// refused rather than silently treated as one that never cosigns.
//
// Errors are *SyntaxError values wrapping ErrMalformedPolicy.
func ParsePolicy(data []byte) (*Policy, error) {
	if len(data) > maxPolicyLen {
		return nil, syntaxErr(ErrMalformedPolicy, 0, "", fmt.Sprintf("policy is %d bytes, longer than %d", len(data), maxPolicyLen))
	}
	b := newPolicyBuilder()
	quorumLine := 0
	rest := data
	for n := 1; len(rest) > 0; n++ {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		for _, c := range line {
			if c < 0x20 && c != '\t' || c == 0x7f {
				return nil, syntaxErr(ErrMalformedPolicy, n, "", fmt.Sprintf("control character 0x%02x", c))
			}
		}
		fields := strings.FieldsFunc(string(line), func(r rune) bool { return r == ' ' || r == '\t' })
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return syntaxErr(ErrMalformedPolicy, n, fields[0], fmt.Sprintf(format, args...))
		}
		switch fields[0] {
		case "log":
			if len(fields) < 2 || len(fields) > 3 {
				return nil, bad("want log <vkey> [<url>]")
			}
			if len(b.p.logs) == maxPolicyEntries {
				return nil, bad("more than %d logs", maxPolicyEntries)
			}
			name, hash, typ, key, err := parseVerifierKey(fields[1])
			if err != nil {
				return nil, bad("%v", err)
			}
			if typ != TypeEd25519 {
				return nil, bad("log key type 0x%02x, want 0x01 (Ed25519)", typ)
			}
			v, err := NewVerifier(fields[1])
			if err != nil {
				return nil, bad("%v", err)
			}
			if err := b.useKey(key, "log "+name); err != nil {
				return nil, bad("%v", err)
			}
			for _, l := range b.p.logs {
				if l.verifier.Name() == name && l.verifier.KeyHash() == hash {
					return nil, bad("two logs have key name and ID %s+%08x", name, hash)
				}
			}
			url := ""
			if len(fields) == 3 {
				url = fields[2]
			}
			b.p.logs = append(b.p.logs, policyLog{verifier: v, vkey: canonicalVKey(name, hash, typ, key), url: url})
		case "witness":
			if len(fields) < 3 || len(fields) > 4 {
				return nil, bad("want witness <name> <vkey> [<url>]")
			}
			v, err := NewCosignatureVerifier(fields[2])
			if err != nil {
				return nil, bad("%v", err)
			}
			url := ""
			if len(fields) == 4 {
				url = fields[3]
			}
			if err := b.addWitness(fields[1], v, url); err != nil {
				return nil, bad("%v", err)
			}
		case "group":
			if len(fields) < 4 {
				return nil, bad("want group <name> all|any|<k> <name>...")
			}
			name, members := fields[1], fields[3:]
			if name == "none" {
				return nil, bad(`"none" is reserved and cannot name a group`)
			}
			if b.names[name] != nil {
				return nil, bad("name %q defined twice", name)
			}
			if len(b.p.groups) == maxPolicyEntries {
				return nil, bad("more than %d groups", maxPolicyEntries)
			}
			g := group{name: name}
			switch fields[2] {
			case "all":
				g.k = len(members)
			case "any":
				g.k = 1
			default:
				k, ok := parseDecimal([]byte(fields[2]))
				if !ok || k < 1 || k > uint64(len(members)) {
					return nil, bad("threshold %q, want all, any or a decimal k with 1 <= k <= %d", fields[2], len(members))
				}
				g.k = int(k)
			}
			listed := make(map[string]bool, len(members))
			for _, m := range members {
				ref := b.names[m]
				switch {
				case m == "none":
					return nil, bad(`"none" cannot be a group member`)
				case ref == nil:
					return nil, bad("member %q is not defined on an earlier line", m)
				case listed[m]:
					return nil, bad("member %q listed twice", m)
				}
				listed[m] = true
				g.members = append(g.members, *ref)
			}
			b.names[name] = &member{group: true, index: len(b.p.groups)}
			b.p.groups = append(b.p.groups, g)
		case "quorum":
			if len(fields) != 2 {
				return nil, bad("want quorum <name>|none")
			}
			if quorumLine != 0 {
				return nil, bad("second quorum line (first on line %d)", quorumLine)
			}
			quorumLine = n
			if fields[1] != "none" {
				ref := b.names[fields[1]]
				if ref == nil {
					return nil, bad("%q is not defined on an earlier line", fields[1])
				}
				b.p.quorum = ref
			}
		default:
			return nil, syntaxErr(ErrMalformedPolicy, n, "", fmt.Sprintf("unknown keyword %q", fields[0]))
		}
	}
	if quorumLine == 0 {
		return nil, syntaxErr(ErrMalformedPolicy, 0, "quorum", "no quorum line")
	}
	return b.p, nil
}

// LoadPolicy reads and parses the policy file at path.
func LoadPolicy(path string) (*Policy, error) {
	b, err := readSmallFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func canonicalVKey(name string, hash uint32, typ byte, key []byte) string {
	return fmt.Sprintf("%s+%08x+%s", name, hash, base64.StdEncoding.EncodeToString(append([]byte{typ}, key...)))
}

// MarshalText returns the policy in tlog-policy form, canonically spelled:
// logs, witnesses, groups with numeric thresholds, then the quorum.
// ParsePolicy of the result gives an equivalent policy.
func (p *Policy) MarshalText() ([]byte, error) {
	if !p.built {
		return nil, errZeroPolicy
	}
	var b bytes.Buffer
	for _, l := range p.logs {
		b.WriteString("log " + l.vkey)
		if l.url != "" {
			b.WriteString(" " + l.url)
		}
		b.WriteByte('\n')
	}
	for _, w := range p.witnesses {
		b.WriteString("witness " + w.Name + " " + w.Verifier.String())
		if w.URL != "" {
			b.WriteString(" " + w.URL)
		}
		b.WriteByte('\n')
	}
	for _, g := range p.groups {
		fmt.Fprintf(&b, "group %s %d", g.name, g.k)
		for _, m := range g.members {
			b.WriteString(" " + p.memberName(m))
		}
		b.WriteByte('\n')
	}
	if p.quorum == nil {
		b.WriteString("quorum none\n")
	} else {
		b.WriteString("quorum " + p.memberName(*p.quorum) + "\n")
	}
	return b.Bytes(), nil
}

// UnmarshalText parses a policy with ParsePolicy into p.
func (p *Policy) UnmarshalText(text []byte) error {
	q, err := ParsePolicy(text)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

func (p *Policy) memberName(m member) string {
	if m.group {
		return p.groups[m.index].name
	}
	return p.witnesses[m.index].Name
}

// Witnesses returns the policy's witnesses in policy order.
func (p *Policy) Witnesses() []Witness { return append([]Witness(nil), p.witnesses...) }

// Logs returns the verifiers of the policy's log lines, in order.
func (p *Policy) Logs() []note.Verifier {
	out := make([]note.Verifier, len(p.logs))
	for i, l := range p.logs {
		out[i] = l.verifier
	}
	return out
}

// LogKeys returns the verifier keys of the policy's log lines, canonically
// spelled, so that a caller given the same key out of band can tell it is
// one key (disclosure.MergeLogKeys).
func (p *Policy) LogKeys() []string {
	out := make([]string, len(p.logs))
	for i, l := range p.logs {
		out[i] = l.vkey
	}
	return out
}

// RequiresWitnesses reports whether the quorum needs any cosignature; it is
// false only for "quorum none".
func (p *Policy) RequiresWitnesses() bool { return !p.built || p.quorum != nil }

// met reports whether the quorum is satisfied when exactly the witnesses
// with cosigned[i] true have cosigned. Groups refer only to earlier groups,
// so one pass in definition order evaluates each group once.
func (p *Policy) met(cosigned []bool) bool {
	if p.quorum == nil {
		return true
	}
	ok := make([]bool, len(p.groups))
	val := func(m member) bool {
		if m.group {
			return ok[m.index]
		}
		return cosigned[m.index]
	}
	for i, g := range p.groups {
		n := 0
		for _, m := range g.members {
			if val(m) {
				n++
			}
		}
		ok[i] = n >= g.k
	}
	return val(*p.quorum)
}

// A WitnessResult is what Evaluate found about one witness of the policy.
type WitnessResult struct {
	Name     string    // the witness's name in the policy
	KeyName  string    // its key name
	KeyHash  uint32    // its key ID
	Cosigned bool      // a cosignature by its key verified
	Time     time.Time // the timestamp of its first valid cosignature (UTC); zero unless Cosigned
	Invalid  bool      // a signature line claiming its key did not verify
}

// An Evaluation reports which witnesses of a policy validly cosigned a
// checkpoint, and whether that satisfies the quorum.
type Evaluation struct {
	Checkpoint Checkpoint      // the parsed body; its signatures are not verified by Evaluate
	Witnesses  []WitnessResult // one per policy witness, in policy order
	Met        bool            // the valid cosignatures satisfy the quorum
}

// Cosigned returns the number of distinct witnesses whose cosignature
// verified.
func (e *Evaluation) Cosigned() int {
	n := 0
	for _, w := range e.Witnesses {
		if w.Cosigned {
			n++
		}
	}
	return n
}

// Evaluate reports, for a signed checkpoint note, which of the policy's
// witnesses cosigned it validly and when, and whether the quorum is met.
// A witness counts once however many lines it signed; a line that fails to
// verify never counts and marks the witness Invalid; lines from other keys
// are ignored. The note and body must parse (Open's rules), and an
// incoherent checkpoint is an error.
//
// Evaluate is a report for publishers and monitors. It does not check the
// log's signature and does not reject notes with invalid lines, so Met
// alone does not make a checkpoint trustworthy: auditors use Verify.
func (p *Policy) Evaluate(msg []byte) (*Evaluation, error) {
	if !p.built {
		return nil, errZeroPolicy
	}
	text, lines, err := splitNote(msg)
	if err != nil {
		return nil, err
	}
	cp, err := Parse(text)
	if err != nil {
		return nil, err
	}
	if err := cp.Coherent(); err != nil {
		return nil, err
	}
	ev := &Evaluation{Checkpoint: cp, Witnesses: make([]WitnessResult, len(p.witnesses))}
	for i, w := range p.witnesses {
		ev.Witnesses[i] = WitnessResult{Name: w.Name, KeyName: w.Verifier.Name(), KeyHash: w.Verifier.KeyHash()}
	}
	for _, l := range lines {
		i, ok := p.byKey[nameHash{l.name, l.hash}]
		if !ok {
			continue
		}
		r := &ev.Witnesses[i]
		if !p.witnesses[i].Verifier.Verify(text, l.sig) {
			r.Invalid = true
			continue
		}
		if !r.Cosigned {
			t, _ := cosignatureTimestamp(l.sig)
			r.Cosigned, r.Time = true, time.Unix(int64(t), 0).UTC()
		}
	}
	cosigned := make([]bool, len(ev.Witnesses))
	for i, r := range ev.Witnesses {
		cosigned[i] = r.Cosigned
	}
	ev.Met = p.met(cosigned)
	return ev, nil
}

// Verify is the auditor's check of a signed checkpoint note. It accepts the
// note only if all of these hold:
//
//   - the note and its body parse (Open's rules);
//   - every line from a known key verifies (else a *SignatureError); the
//     known keys are the policy's logs, the extra logs given, and the
//     policy's witnesses;
//   - a signature verifies from a log key whose name is the checkpoint
//     origin (else ErrUnverified); with no log key at all, Verify fails;
//   - the checkpoint is coherent (else ErrIncoherent);
//   - the witnesses whose cosignatures verified satisfy the quorum (else
//     ErrPolicyNotMet). With "quorum none" no cosignature is needed.
//
// The returned Signed holds the verified log and witness signatures only.
func (p *Policy) Verify(msg []byte, logs ...note.Verifier) (*Signed, error) {
	if !p.built {
		return nil, errZeroPolicy
	}
	var list []note.Verifier
	isLog := make(map[nameHash]bool)
	addLog := func(v note.Verifier) error {
		if _, ok := v.(*CosignatureVerifier); ok {
			return fmt.Errorf("%w: witness key %s+%08x given as a log key", ErrUnsupportedKey, v.Name(), v.KeyHash())
		}
		k := nameHash{v.Name(), v.KeyHash()}
		if isLog[k] {
			return fmt.Errorf("%w: log key %s+%08x given twice", ErrMalformedPolicy, k.name, k.hash)
		}
		if _, ok := p.byKey[k]; ok {
			return fmt.Errorf("%w: log key %s+%08x is also a witness key", ErrMalformedPolicy, k.name, k.hash)
		}
		isLog[k] = true
		list = append(list, v)
		return nil
	}
	for _, l := range p.logs {
		if err := addLog(l.verifier); err != nil {
			return nil, err
		}
	}
	for _, v := range logs {
		if v == nil {
			return nil, fmt.Errorf("%w: nil log verifier", ErrUnverified)
		}
		if err := addLog(v); err != nil {
			return nil, err
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: no log key to verify the checkpoint with", ErrUnverified)
	}
	for _, w := range p.witnesses {
		list = append(list, w.Verifier)
	}

	text, lines, err := splitNote(msg)
	if err != nil {
		return nil, err
	}
	cp, err := Parse(text)
	if err != nil {
		return nil, err
	}
	sigs, err := verifyLines(text, lines, note.VerifierList(list...))
	if err != nil {
		return nil, err
	}
	logSigned := false
	cosigned := make([]bool, len(p.witnesses))
	for _, s := range sigs {
		k := nameHash{s.sig.Name, s.sig.Hash}
		if isLog[k] && s.sig.Name == cp.Origin {
			logSigned = true
		}
		if i, ok := p.byKey[k]; ok {
			cosigned[i] = true
		}
	}
	if !logSigned {
		return nil, fmt.Errorf("%w: no valid signature by a log key named %q", ErrUnverified, cp.Origin)
	}
	if err := cp.Coherent(); err != nil {
		return nil, err
	}
	if !p.met(cosigned) {
		n := 0
		for _, c := range cosigned {
			if c {
				n++
			}
		}
		return nil, fmt.Errorf("%w: %d of %d policy witnesses validly cosigned %s@%d", ErrPolicyNotMet, n, len(p.witnesses), cp.Origin, cp.Size)
	}
	return &Signed{cp: cp, text: text, sigs: sigs}, nil
}
