package hubwire

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Byte strings inside JSON payloads (spec/PROTOCOL.md §6) are arrays of
// numbers, one per byte. encoding/json writes []byte as base64, so before a
// value that can hold a byte string is encoded it is copied into a shadow
// value: the same shape, built with reflect, where every byte-slice type
// becomes jsonBytes (which marshals as an array) and every interface holds
// the shadow of its dynamic value. encoding/json then does all the rest
// (tags, omitempty, embedding, Marshalers) as usual.
//
// A type that cannot hold a byte string (no byte slice and no interface
// reachable from it) needs no shadow: it is encoded as it is, after one
// cached type lookup; a map, slice or interface whose type could hold one
// is first looked through (holdsBytes) and encoded as it is when it holds
// none. A struct type that can is always copied. Reading needs nothing: encoding/json decodes an array
// of numbers into a []byte (and still accepts a base64 string).
//
// Left as encoding/json has them: byte slices inside a type that has its own
// MarshalJSON or MarshalText (pointer receiver included), and map keys.
// A copied struct loses its methods, so `omitzero` on a field of a struct
// type with its own IsZero falls back to the plain zero-value test there.

// jsonBytes is a byte string that marshals as an array of numbers.
type jsonBytes []byte

func (b jsonBytes) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	out := make([]byte, 0, 2+4*len(b))
	out = append(out, '[')
	for i, c := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, uint64(c), 10)
	}
	return append(out, ']'), nil
}

// shadowPlan says how values of one type are copied into their shadow.
type shadowPlan struct {
	shadow reflect.Type
	// conv copies src (readable; of the planned type) into a new value of
	// the shadow type.
	conv func(src reflect.Value, depth int) (reflect.Value, error)
}

// maxShadowDepth bounds the copy, so that a cyclic value fails instead of
// recursing forever (encoding/json would report the cycle).
const maxShadowDepth = 10000

var errShadowDepth = errors.New("json: value nested too deeply or cyclic")

var (
	anyType           = reflect.TypeFor[any]()
	jsonBytesType     = reflect.TypeFor[jsonBytes]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// shadowPlans caches, per type, its *shadowPlan, or nil when values of the
// type are encoded as they are.
var shadowPlans sync.Map

// jsonReady returns v ready for encoding/json: v itself when its type can
// hold no byte string, else its shadow.
func jsonReady(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	p := planFor(reflect.TypeOf(v))
	if p == nil {
		return v, nil
	}
	rv := reflect.ValueOf(v)
	if !holdsBytes(rv, 0) {
		return v, nil
	}
	s, err := p.conv(rv, 0)
	if err != nil {
		return nil, err
	}
	return s.Interface(), nil
}

func planFor(t reflect.Type) *shadowPlan {
	if p, ok := shadowPlans.Load(t); ok {
		return p.(*shadowPlan)
	}
	p2, _ := shadowPlans.LoadOrStore(t, newPlan(t))
	return p2.(*shadowPlan)
}

// newPlan plans t; a type reflect cannot shadow (StructOf refuses some
// shapes) fails each encoding with an error rather than write base64.
func newPlan(t reflect.Type) (p *shadowPlan) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("json: cannot write the byte strings in %s as arrays: %v", t, r)
			p = &shadowPlan{conv: func(reflect.Value, int) (reflect.Value, error) { return reflect.Value{}, err }}
		}
	}()
	return (&planner{building: map[reflect.Type]bool{}}).plan(t)
}

// holdsBytes looks for a non-nil byte string in a value of dynamic data
// (maps, slices, interfaces) without copying it, so that a map[string]any
// of plain values is encoded as it is. It answers true for a struct whose
// type can hold one, and when the value is too deep to tell.
func holdsBytes(v reflect.Value, depth int) bool {
	if depth > 100 {
		return true
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		return !v.IsNil() && holdsBytes(v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && isByteString(v.Type()) {
			return !v.IsNil()
		}
		if !mayHoldBytesCached(v.Type().Elem()) {
			return false
		}
		for i := range v.Len() {
			if holdsBytes(v.Index(i), depth+1) {
				return true
			}
		}
		return false
	case reflect.Map:
		if !mayHoldBytesCached(v.Type().Elem()) {
			return false
		}
		var it reflect.MapIter
		it.Reset(v)
		for it.Next() {
			if holdsBytes(it.Value(), depth+1) {
				return true
			}
		}
		return false
	case reflect.Struct:
		return planFor(v.Type()) != nil
	}
	return false
}

func mayHoldBytesCached(t reflect.Type) bool {
	if t.Kind() == reflect.Interface {
		return !opaque(t)
	}
	return planFor(t) != nil
}

// opaque types marshal themselves: encoding/json does not look inside.
func opaque(t reflect.Type) bool {
	return t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) ||
		(t.Kind() != reflect.Pointer && (reflect.PointerTo(t).Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)))
}

// isByteString is what encoding/json writes as base64.
func isByteString(t reflect.Type) bool {
	if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Uint8 {
		return false
	}
	p := reflect.PointerTo(t.Elem())
	return !p.Implements(jsonMarshalerType) && !p.Implements(textMarshalerType)
}

// mayHoldBytes: whether a value of type t can hold a byte string that
// encoding/json would write as base64. seen breaks recursive types.
func mayHoldBytes(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] || opaque(t) {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Slice:
		return isByteString(t) || mayHoldBytes(t.Elem(), seen)
	case reflect.Pointer, reflect.Array, reflect.Map:
		return mayHoldBytes(t.Elem(), seen)
	case reflect.Struct:
		for _, f := range jsonFields(t) {
			if mayHoldBytes(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// jsonFields are the fields of struct t that encoding/json can see: it
// ignores `json:"-"` and unexported fields other than embedded structs.
func jsonFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("json") == "-" {
			continue
		}
		ft := f.Type
		if f.Anonymous && ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if !f.IsExported() && !(f.Anonymous && ft.Kind() == reflect.Struct) {
			continue
		}
		out = append(out, f)
	}
	return out
}

type planner struct{ building map[reflect.Type]bool }

// plan builds the plan for t, or nil when t needs no shadow. A type met
// again while its own plan is being built (a recursive type) is shadowed
// as an interface, converted when a value comes.
func (pl *planner) plan(t reflect.Type) *shadowPlan {
	if !mayHoldBytes(t, map[reflect.Type]bool{}) {
		return nil
	}
	if pl.building[t] {
		return dynamicPlan(func() *shadowPlan { return planFor(t) })
	}
	pl.building[t] = true
	defer delete(pl.building, t)
	switch t.Kind() {
	case reflect.Interface:
		return dynamicPlan(nil)
	case reflect.Pointer:
		return pl.pointer(t)
	case reflect.Slice:
		if isByteString(t) {
			return &shadowPlan{shadow: jsonBytesType, conv: func(src reflect.Value, _ int) (reflect.Value, error) {
				return reflect.ValueOf(jsonBytes(src.Bytes())), nil
			}}
		}
		return pl.slice(t)
	case reflect.Array:
		return pl.array(t)
	case reflect.Map:
		return pl.mapOf(t)
	case reflect.Struct:
		return pl.structOf(t)
	}
	return nil
}

// dynamicPlan shadows as `any`: the shadow of the value's dynamic type (of
// the type of, when given, so as to plan a recursive type lazily).
func dynamicPlan(of func() *shadowPlan) *shadowPlan {
	// The value returned is the dynamic value itself (or its shadow): what
	// it is stored into (an `any`) boxes it.
	return &shadowPlan{shadow: anyType, conv: func(src reflect.Value, depth int) (reflect.Value, error) {
		if (src.Kind() == reflect.Interface || src.Kind() == reflect.Pointer) && src.IsNil() {
			return reflect.Zero(anyType), nil
		}
		if src.Kind() == reflect.Interface {
			src = src.Elem()
		}
		var p *shadowPlan
		if of != nil {
			p = of()
		} else {
			p = planFor(src.Type())
		}
		if p == nil {
			return src, nil
		}
		return p.conv(src, depth+1)
	}}
}

func (pl *planner) pointer(t reflect.Type) *shadowPlan {
	return pointerTo(pl.plan(t.Elem()))
}

// embedded plans an embedded struct or pointer to one: always a copy.
func (pl *planner) embedded(t reflect.Type) *shadowPlan {
	if t.Kind() == reflect.Pointer {
		return pointerTo(pl.structOf(t.Elem()))
	}
	return pl.structOf(t)
}

func pointerTo(elem *shadowPlan) *shadowPlan {
	st := reflect.PointerTo(elem.shadow)
	return &shadowPlan{shadow: st, conv: func(src reflect.Value, depth int) (reflect.Value, error) {
		if src.IsNil() {
			return reflect.Zero(st), nil
		}
		if depth > maxShadowDepth {
			return reflect.Value{}, errShadowDepth
		}
		e, err := elem.conv(src.Elem(), depth+1)
		if err != nil {
			return reflect.Value{}, err
		}
		out := reflect.New(elem.shadow)
		out.Elem().Set(e)
		return out, nil
	}}
}

// keep returns the plan for t, or one that copies the value unchanged.
func (pl *planner) keep(t reflect.Type) *shadowPlan {
	if p := pl.plan(t); p != nil {
		return p
	}
	return &shadowPlan{shadow: t, conv: func(src reflect.Value, _ int) (reflect.Value, error) { return src, nil }}
}

func (pl *planner) slice(t reflect.Type) *shadowPlan {
	elem := pl.keep(t.Elem())
	st := reflect.SliceOf(elem.shadow)
	return &shadowPlan{shadow: st, conv: func(src reflect.Value, depth int) (reflect.Value, error) {
		if src.IsNil() {
			return reflect.Zero(st), nil
		}
		out := reflect.MakeSlice(st, src.Len(), src.Len())
		return out, convElems(out, src, elem, depth)
	}}
}

func (pl *planner) array(t reflect.Type) *shadowPlan {
	elem := pl.keep(t.Elem())
	st := reflect.ArrayOf(t.Len(), elem.shadow)
	return &shadowPlan{shadow: st, conv: func(src reflect.Value, depth int) (reflect.Value, error) {
		out := reflect.New(st).Elem()
		return out, convElems(out, src, elem, depth)
	}}
}

func convElems(out, src reflect.Value, elem *shadowPlan, depth int) error {
	if depth > maxShadowDepth {
		return errShadowDepth
	}
	for i := range src.Len() {
		e, err := elem.conv(src.Index(i), depth+1)
		if err != nil {
			return err
		}
		out.Index(i).Set(e)
	}
	return nil
}

func (pl *planner) mapOf(t reflect.Type) *shadowPlan {
	elem := pl.keep(t.Elem())
	st := reflect.MapOf(t.Key(), elem.shadow)
	return &shadowPlan{shadow: st, conv: func(src reflect.Value, depth int) (reflect.Value, error) {
		if src.IsNil() {
			return reflect.Zero(st), nil
		}
		if depth > maxShadowDepth {
			return reflect.Value{}, errShadowDepth
		}
		out := reflect.MakeMapWithSize(st, src.Len())
		for it := src.MapRange(); it.Next(); {
			e, err := elem.conv(it.Value(), depth+1)
			if err != nil {
				return reflect.Value{}, err
			}
			out.SetMapIndex(it.Key(), e)
		}
		return out, nil
	}}
}

// structOf shadows a struct with reflect.StructOf: the fields encoding/json
// sees, same names and tags, each of its shadow type. An embedded struct is
// always copied into a struct of its own (a type made by StructOf cannot
// embed a type with methods); whatever json names by the embedded field's
// name (an embedded non-struct, or a tagged one) becomes an ordinary field.
func (pl *planner) structOf(t reflect.Type) *shadowPlan {
	type fieldPlan struct {
		index int
		plan  *shadowPlan
	}
	var fields []reflect.StructField
	var plans []fieldPlan
	unexported := false // read through unsafe, from an addressable copy
	for _, f := range jsonFields(t) {
		unexported = unexported || !f.IsExported()
		ft := f.Type
		if f.Anonymous && ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		var p *shadowPlan
		sf := reflect.StructField{Name: f.Name, Tag: f.Tag}
		if f.Anonymous && ft.Kind() == reflect.Struct && name == "" {
			p = pl.embedded(f.Type)
			sf.Anonymous = true
			sf.Name = "Embedded" + strconv.Itoa(len(fields)) // any name: json promotes its fields
		} else {
			p = pl.keep(f.Type)
			if !f.IsExported() {
				sf.Name = "Field" + strconv.Itoa(len(fields)) + "_" + f.Name
			}
		}
		sf.Type = p.shadow
		fields = append(fields, sf)
		plans = append(plans, fieldPlan{f.Index[0], p})
	}
	st := reflect.StructOf(fields)
	return &shadowPlan{shadow: st, conv: func(src reflect.Value, depth int) (reflect.Value, error) {
		if unexported && !src.CanAddr() {
			c := reflect.New(src.Type()).Elem()
			c.Set(src)
			src = c
		}
		out := reflect.New(st).Elem()
		for i, fp := range plans {
			f := src.Field(fp.index)
			if !f.CanInterface() {
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			v, err := fp.plan.conv(f, depth+1)
			if err != nil {
				return reflect.Value{}, err
			}
			out.Field(i).Set(v)
		}
		return out, nil
	}}
}
