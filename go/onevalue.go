package hubwire

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// What counts as one MessagePack value (spec/PROTOCOL.md §6.2): a payload
// is exactly one value of the data model MessagePack shares with JSON.
// checkMsgpack walks the bytes once, before the msgpack library sees them,
// because the library accepts more (ext types, the timestamp, non-string
// map keys).

var errCutShort = errors.New("the payload ends inside the value")

// maxDepth is the deepest nesting of arrays and maps accepted (§6.2 lets a
// receiver refuse deeper values); it also bounds the walk's stack.
const maxDepth = 128

// openContainer is one container being walked: the elements left in it (a
// map of n entries counts 2n; an even count left means a key is next).
type openContainer struct {
	left  uint64
	isMap bool
}

// checkMsgpack returns an error unless b is exactly one MessagePack value:
// nothing after it, not cut short, no ext types (nor the timestamp), no
// 0xc1, only str map keys, valid UTF-8 in every str, at most maxDepth
// containers deep. Iterative, with a heap stack whose bottom entry is the
// whole value.
func checkMsgpack(b []byte) error {
	stack := []openContainer{{left: 1}}
	i := 0
	take := func(k uint64) ([]byte, error) {
		if k > uint64(len(b)-i) {
			return nil, errCutShort
		}
		s := b[i : i+int(k)]
		i += int(k)
		return s, nil
	}
	length := func(k uint64) (uint64, error) {
		s, err := take(k)
		var n uint64
		for _, x := range s {
			n = n<<8 | uint64(x)
		}
		return n, err
	}
	str := func(k uint64) error {
		s, err := take(k)
		if err == nil && !utf8.Valid(s) {
			return errors.New("a string is not valid UTF-8")
		}
		return err
	}
	open := func(c openContainer) error {
		if len(stack) > maxDepth {
			return fmt.Errorf("the value is nested deeper than %d arrays and maps", maxDepth)
		}
		stack = append(stack, c)
		return nil
	}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.left == 0 {
			stack = stack[:len(stack)-1]
			continue
		}
		key := top.isMap && top.left%2 == 0
		top.left--
		if i >= len(b) {
			return errCutShort
		}
		t := b[i]
		i++
		if key && !(t >= 0xa0 && t <= 0xbf || t >= 0xd9 && t <= 0xdb) {
			return fmt.Errorf("a map key must be a string, got the type byte 0x%02x", t)
		}
		var err error
		switch {
		case t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3:
		case t <= 0x8f:
			err = open(openContainer{2 * uint64(t&0x0f), true})
		case t <= 0x9f:
			err = open(openContainer{uint64(t & 0x0f), false})
		case t <= 0xbf:
			err = str(uint64(t & 0x1f))
		case t == 0xc1:
			return errors.New("0xc1 is not a MessagePack value")
		case t >= 0xc7 && t <= 0xc9, t >= 0xd4 && t <= 0xd8:
			return fmt.Errorf("MessagePack ext types are not part of the data model (type byte 0x%02x)", t)
		case t >= 0xc4 && t <= 0xc6: // bin8/16/32
			var n uint64
			if n, err = length(1 << (t - 0xc4)); err == nil {
				_, err = take(n)
			}
		case t >= 0xd9 && t <= 0xdb: // str8/16/32
			var n uint64
			if n, err = length(1 << (t - 0xd9)); err == nil {
				err = str(n)
			}
		case t == 0xca || t == 0xce || t == 0xd2:
			_, err = take(4)
		case t == 0xcb || t == 0xcf || t == 0xd3:
			_, err = take(8)
		case t == 0xcc || t == 0xd0:
			_, err = take(1)
		case t == 0xcd || t == 0xd1:
			_, err = take(2)
		default: // 0xdc array16, 0xdd array32, 0xde map16, 0xdf map32
			var n uint64
			if n, err = length(2 << (t & 1)); err == nil { // a 16-bit count when t is even, 32-bit when odd
				if t >= 0xde {
					err = open(openContainer{2 * n, true})
				} else {
					err = open(openContainer{n, false})
				}
			}
		}
		if err != nil {
			return err
		}
	}
	if i != len(b) {
		return fmt.Errorf("%d trailing bytes after the value", len(b)-i)
	}
	return nil
}
