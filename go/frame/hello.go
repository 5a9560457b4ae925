package frame

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// The HELLO defaults (spec/PROTOCOL.md §4.1).
const (
	DefaultWindow   = 64   // initial credit per stream received
	DefaultMaxCalls = 4096 // calls accepted in flight as callee
	MinMaxFrame     = 4096 // the smallest max_frame a peer may declare
	// HelloLimit is the HELLO body size every peer accepts whatever its
	// max_frame (spec/PROTOCOL.md §4.1.2): the first frame is read with the
	// limit max(max_frame, HelloLimit).
	HelloLimit = 1 << 20
)

// PeerInfo says who a peer is.
type PeerInfo struct {
	Name    string `json:"name"`    // for logs and listings
	Lang    string `json:"lang"`    // implementation language: rust, go, ts, python, …
	Version string `json:"version"` // implementation version
}

// MethodInfo is one method a peer offers. Schemas are JSON Schema values
// (maps, slices, strings, numbers, as encoding/json produces them).
type MethodInfo struct {
	Name   string `json:"name"`
	Kind   Kind   `json:"-"`
	Input  any    `json:"input"`
	Output any    `json:"output"`
	Errors any    `json:"errors,omitempty"` // the type of its failures; nil if none declared
	Doc    string `json:"doc,omitempty"`    // one line for listings
}

// Hello is the HELLO body: the first frame each way.
type Hello struct {
	Versions []uint32
	Peer     PeerInfo
	MaxFrame uint32
	Window   uint32
	MaxCalls uint32
	Methods  []MethodInfo
	// Token is the dialer's credential (spec/PROTOCOL.md §4.4), "" when
	// absent; an acceptor never sends one. Never log it.
	Token string
}

// MaxToken is the longest token a HELLO may carry, in bytes (§4.4).
const MaxToken = 4096

// TokenMatches reports whether got equals want, in time that depends only
// on their lengths, never on where the first difference is (§4.4).
func TokenMatches(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// NewHello returns a HELLO for version 1 with the default limits and no
// methods.
func NewHello(peer PeerInfo) *Hello {
	return &Hello{Versions: []uint32{Version}, Peer: peer, MaxFrame: DefaultMaxFrame, Window: DefaultWindow, MaxCalls: DefaultMaxCalls}
}

// Method returns the method called name, or nil.
func (h *Hello) Method(name string) *MethodInfo {
	for i := range h.Methods {
		if h.Methods[i].Name == name {
			return &h.Methods[i]
		}
	}
	return nil
}

// The wire shape, fields in the canonical order of spec/vectors/README.md.
type wireMethod struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Input  any    `json:"input"`
	Output any    `json:"output"`
	Errors any    `json:"errors,omitempty"`
	Doc    string `json:"doc,omitempty"`
}

type wireHello struct {
	Versions []uint32     `json:"versions"`
	Peer     PeerInfo     `json:"peer"`
	MaxFrame uint32       `json:"max_frame"`
	Window   uint32       `json:"window"`
	MaxCalls uint32       `json:"max_calls"`
	Methods  []wireMethod `json:"methods"`
	Token    string       `json:"token,omitempty"`
}

func emptySchema(s any) any {
	if s == nil {
		return map[string]any{}
	}
	return s
}

// JSON returns the body: compact, every field present, keys in the
// canonical order (schema maps sorted by key), nothing escaped that need
// not be.
func (h *Hello) JSON() []byte {
	w := wireHello{Versions: h.Versions, Peer: h.Peer, MaxFrame: h.MaxFrame, Window: h.Window, MaxCalls: h.MaxCalls, Methods: []wireMethod{}, Token: h.Token}
	for _, m := range h.Methods {
		w.Methods = append(w.Methods, wireMethod{m.Name, m.Kind.String(), emptySchema(m.Input), emptySchema(m.Output), m.Errors, m.Doc})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		panic("frame: a HELLO whose schemas do not encode as JSON: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// ParseHello parses and validates a HELLO body (spec/PROTOCOL.md §4.1):
// defaults filled in, unknown fields ignored, anything missing, of the
// wrong type or out of range a protocol error.
func ParseHello(body []byte) (*Hello, *Error) {
	bad := func(format string, a ...any) (*Hello, *Error) {
		return nil, protocolErr("invalid HELLO body: "+format, a...)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return bad("%v", err)
	}
	if top == nil {
		return bad("not a JSON object")
	}
	h := &Hello{MaxFrame: DefaultMaxFrame, Window: DefaultWindow, MaxCalls: DefaultMaxCalls}
	raw, ok := top["versions"]
	if !ok {
		return bad("versions is missing")
	}
	var vs []json.RawMessage
	if err := json.Unmarshal(raw, &vs); err != nil || vs == nil || len(vs) == 0 {
		return bad("versions must be a non-empty list of integers >= 1, got %s", raw)
	}
	for _, v := range vs {
		n, ok := uintField(v, 1)
		if !ok {
			return bad("versions must be a non-empty list of integers >= 1, got %s", raw)
		}
		h.Versions = append(h.Versions, n)
	}
	raw, ok = top["peer"]
	if !ok {
		return bad("peer is missing")
	}
	var peer map[string]json.RawMessage
	if err := json.Unmarshal(raw, &peer); err != nil || peer == nil {
		return bad("peer must be an object, got %s", raw)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"name", &h.Peer.Name}, {"lang", &h.Peer.Lang}, {"version", &h.Peer.Version}} {
		v, ok := peer[f.name]
		if !ok || json.Unmarshal(v, f.dst) != nil || v[0] != '"' {
			return bad("peer.%s must be a string", f.name)
		}
	}
	for _, f := range []struct {
		name string
		min  uint32
		dst  *uint32
	}{{"max_frame", MinMaxFrame, &h.MaxFrame}, {"window", 1, &h.Window}, {"max_calls", 1, &h.MaxCalls}} {
		if v, ok := top[f.name]; ok && string(v) != "null" {
			n, ok := uintField(v, f.min)
			if !ok {
				return bad("%s must be an integer from %d to 4294967295, got %s", f.name, f.min, v)
			}
			*f.dst = n
		}
	}
	if raw, ok := top["methods"]; ok && string(raw) != "null" {
		var ms []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &ms); err != nil || ms == nil {
			return bad("methods must be an array of objects")
		}
		for _, m := range ms {
			mi, err := parseMethod(m)
			if err != nil {
				return nil, err
			}
			h.Methods = append(h.Methods, mi)
		}
	}
	if v, ok := top["token"]; ok && string(v) != "null" {
		if v[0] != '"' || json.Unmarshal(v, &h.Token) != nil || len(h.Token) == 0 || len(h.Token) > MaxToken {
			return bad("token must be a string of 1-%d bytes", MaxToken)
		}
	}
	return h, nil
}

func parseMethod(m map[string]json.RawMessage) (MethodInfo, *Error) {
	var mi MethodInfo
	bad := func(format string, a ...any) (MethodInfo, *Error) {
		return mi, protocolErr("invalid HELLO body: "+format, a...)
	}
	if m == nil {
		return bad("a method must be an object")
	}
	v, ok := m["name"]
	if !ok || v[0] != '"' || json.Unmarshal(v, &mi.Name) != nil {
		return bad("a method's name must be a string")
	}
	if len(mi.Name) == 0 || len(mi.Name) > 255 {
		return bad("method name must be 1-255 bytes, got %d bytes", len(mi.Name))
	}
	var kind string
	v, ok = m["kind"]
	if !ok || v[0] != '"' || json.Unmarshal(v, &kind) != nil {
		return bad("method %q: kind must be a string", mi.Name)
	}
	if mi.Kind, ok = KindByName(kind); !ok {
		return bad("method %q: unknown kind %q", mi.Name, kind)
	}
	for _, f := range []struct {
		name string
		dst  *any
	}{{"input", &mi.Input}, {"output", &mi.Output}, {"errors", &mi.Errors}} {
		if v, ok := m[f.name]; ok {
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			if d.Decode(f.dst) != nil {
				return bad("method %q: %s is not JSON", mi.Name, f.name)
			}
			// A schema is an object or a boolean; null is absent (§4.1.1).
			switch (*f.dst).(type) {
			case nil, map[string]any, bool:
			default:
				return bad("method %q: %s must be a JSON Schema (an object or a boolean), got %s", mi.Name, f.name, v)
			}
		}
	}
	mi.Input, mi.Output = emptySchema(mi.Input), emptySchema(mi.Output)
	if v, ok := m["doc"]; ok && string(v) != "null" {
		if v[0] != '"' || json.Unmarshal(v, &mi.Doc) != nil {
			return bad("method %q: doc must be a string", mi.Name)
		}
	}
	return mi, nil
}

// uintField parses a JSON number in [min, 2^32-1] whose value is an
// integer, however written: 64, 64.0 and 6.4e1 are all 64 (§4.1.1).
func uintField(v json.RawMessage, min uint32) (uint32, bool) {
	n, err := strconv.ParseUint(string(v), 10, 32)
	if err != nil {
		// v is valid JSON (the body parsed), so only a number parses here.
		f, ferr := strconv.ParseFloat(string(v), 64)
		if ferr != nil || f != math.Trunc(f) || f < 0 || f > math.MaxUint32 {
			return 0, false
		}
		n = uint64(f)
	}
	if uint32(n) < min {
		return 0, false
	}
	return uint32(n), true
}

// Negotiate returns the highest version in both lists (spec/PROTOCOL.md
// §4.2), or unsupported_version naming both lists.
func Negotiate(ours, theirs []uint32) (uint32, *Error) {
	best, found := uint32(0), false
	for _, v := range ours {
		if slices.Contains(theirs, v) && (!found || v > best) {
			best, found = v, true
		}
	}
	if !found {
		return 0, &Error{UnsupportedVersion, fmt.Sprintf("no common protocol version: we speak %s, peer speaks %s", list(ours), list(theirs))}
	}
	return best, nil
}

// list writes versions as the Rust runtime does: [1, 2, 3].
func list(vs []uint32) string {
	b := []byte{'['}
	for i, v := range vs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return string(append(b, ']'))
}

// Fit shortens the body to at most HelloLimit bytes, the size every peer
// accepts (spec/PROTOCOL.md §4.1.2): first the docs go, then the schemas
// ({}, no errors), which are descriptive; names and kinds always stay. It
// works on a copy of the method list, which may be the service's own.
func (h *Hello) Fit() {
	fits := func() bool { return len(h.JSON()) <= HelloLimit }
	if fits() {
		return
	}
	h.Methods = slices.Clone(h.Methods)
	for i := range h.Methods {
		h.Methods[i].Doc = ""
	}
	if fits() {
		return
	}
	for i := range h.Methods {
		m := &h.Methods[i]
		m.Input, m.Output, m.Errors = map[string]any{}, map[string]any{}, nil
	}
}
