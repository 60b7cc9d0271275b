package wasmrt

import (
	"errors"
	"fmt"
)

// A call must stop at its deadline even when the plugin loops forever.
// wazero's way, WithCloseOnContextDone, leaves compiled code at every loop
// back-edge to ask Go whether the module was closed, and Go compiles each
// function to wasm as one dispatch loop, so a Go plugin paid that exit on
// nearly every branch (a no-op call: 31 µs against 11.7 µs without). And
// each call spawned a watchdog goroutine.
//
// Instead the host rewrites a plugin before compiling it. Two mutable i32
// globals are added, $interrupt (exported as interruptExport) and $fuel,
// and every loop starts with
//
//	$fuel -= 1
//	if $fuel <= 0 {
//	  $fuel = yieldEvery
//	  memory.grow 0        ;; an exit to Go, changing nothing
//	  if $interrupt { unreachable }
//	}
//
// a few loads and stores and a branch. To stop a call the host sets
// $interrupt from another goroutine (api.MutableGlobal.Set writes the word
// the compiled code loads); the loop traps within yieldEvery iterations
// and the instance is discarded.
//
// The exit to Go is what makes that safe. Native code that never leaves
// for Go cannot be preempted: the garbage collector, which needs every P
// to reach a safe point, and with one P the scheduler itself, would wait
// for the loop, and the loop waits for the goroutine that sets the
// interrupt, which cannot run: a deadlock (seen in this package's tests
// before the exit was added). memory.grow with a delta of 0 is the one
// instruction that leaves for Go without an import, which would renumber
// every function of the module; wazero's own check exits to Go at every
// iteration instead of every yieldEvery.
//
// Like wazero's check it is at loop heads only: straight-line code ends
// on its own, and recursion ends at the stack limit.
//
// The rewriter walks every instruction, so it must know every opcode's
// immediates. A module using one it does not know, or without a 32-bit
// memory for the exit, is compiled as it is, with wazero's check instead.

// yieldEvery is the number of loop iterations between exits to Go: about
// 20–100 µs of a tight loop, which bounds how long the module can hold up
// a collection, and how late it notices an interrupt.
const yieldEvery = 1 << 14

// interruptExport is the export name of the added global.
const interruptExport = "compact_host_interrupt"

// startExport is the export name the rewriter gives a module's start
// function, which it removes from the start section: wasm runs a start
// function inside instantiation, before the host can reach the interrupt
// global, so the host calls it itself, right after instantiation and under
// the same deadline as any call.
const startExport = "compact_host_start"

// errNotInstrumentable says the module uses something the rewriter does
// not know; it is not a fault of the module.
var errNotInstrumentable = errors.New("not instrumentable")

// Section ids, in the order the binary format requires.
const (
	secCustom    = 0
	secImport    = 2
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secCode      = 10
	secTag       = 13
	secDataCount = 12
)

// sectionRank is a section's place in the required order (custom sections
// may go anywhere and are not ranked).
func sectionRank(id byte) int {
	switch id {
	case secTag:
		return 55 // between memory (5) and global (6)
	case secDataCount:
		return 95 // between element (9) and code (10)
	}
	return int(id) * 10
}

// instrument returns bin rewritten with the interrupt check, or an error
// wrapping errNotInstrumentable.
func instrument(bin []byte) ([]byte, error) {
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a wasm binary", errNotInstrumentable)
	}
	type section struct {
		id   byte
		body []byte
	}
	var sections []section
	r := &wasmReader{b: bin, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, r.err
		}
		sections = append(sections, section{id, body})
	}
	importedGlobals, definedGlobals := 0, 0
	start := int64(-1)
	for _, s := range sections {
		switch s.id {
		case secStart:
			sr := &wasmReader{b: s.body}
			start = int64(sr.u32())
			if sr.err != nil {
				return nil, sr.err
			}
		case secImport:
			n, err := countImportedGlobals(s.body)
			if err != nil {
				return nil, err
			}
			importedGlobals = n
		case secGlobal:
			sr := &wasmReader{b: s.body}
			definedGlobals = int(sr.u32())
			if sr.err != nil {
				return nil, sr.err
			}
		}
	}
	global := uint32(importedGlobals + definedGlobals)

	present := map[byte]bool{}
	for _, s := range sections {
		present[s.id] = true
	}
	out := make([]byte, 0, len(bin)+len(bin)/8)
	out = append(out, bin[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
		present[id] = true
	}
	// missing emits the global or export section, when the module has
	// none, before the first section that must follow it.
	missing := func(next byte) {
		for _, id := range []byte{secGlobal, secExport} {
			if !present[id] && sectionRank(id) < sectionRank(next) {
				switch id {
				case secGlobal:
					emit(secGlobal, addGlobals(nil))
				case secExport:
					body, err := addExports(nil, global, start)
					if err != nil {
						panic(err) // an empty section cannot collide
					}
					emit(secExport, body)
				}
			}
		}
	}
	for _, s := range sections {
		if s.id != secCustom {
			missing(s.id)
		}
		switch s.id {
		case secGlobal:
			emit(secGlobal, addGlobals(s.body))
		case secExport:
			body, err := addExports(s.body, global, start)
			if err != nil {
				return nil, err
			}
			emit(secExport, body)
		case secStart:
			// dropped: exported as startExport instead
		case secCode:
			body, err := instrumentCode(s.body, global)
			if err != nil {
				return nil, err
			}
			emit(secCode, body)
		default:
			emit(s.id, s.body)
		}
	}
	missing(0xff) // ranks above every section
	return out, nil
}

// addGlobals appends $interrupt, (global (mut i32) (i32.const 0)), and
// $fuel, (global (mut i32) (i32.const yieldEvery)), to a global section.
func addGlobals(body []byte) []byte {
	r := &wasmReader{b: body}
	n := uint32(0)
	if len(body) > 0 {
		n = r.u32()
	}
	out := appendU32(nil, n+2)
	out = append(out, body[r.i:]...)
	out = append(out, 0x7f, 0x01, 0x41, 0x00, 0x0b)
	out = append(out, 0x7f, 0x01, 0x41)
	out = appendS32(out, yieldEvery)
	return append(out, 0x0b)
}

// addExports appends to an export section the interrupt global's export
// and, when start is a function index, the start function's.
func addExports(body []byte, global uint32, start int64) ([]byte, error) {
	r := &wasmReader{b: body}
	n, entries := uint32(0), 0
	if len(body) > 0 {
		n = r.u32()
		entries = r.i
		for range n {
			if name := string(r.name()); name == interruptExport || name == startExport {
				return nil, fmt.Errorf("%w: the module already exports %s", errNotInstrumentable, name)
			}
			r.byte()
			r.u32()
			if r.err != nil {
				return nil, r.err
			}
		}
	}
	added := uint32(1)
	if start >= 0 {
		added++
	}
	out := appendU32(nil, n+added)
	out = append(out, body[entries:]...)
	out = appendU32(out, uint32(len(interruptExport)))
	out = append(out, interruptExport...)
	out = append(out, 0x03)
	out = appendU32(out, global)
	if start >= 0 {
		out = appendU32(out, uint32(len(startExport)))
		out = append(out, startExport...)
		out = append(out, 0x00)
		out = appendU32(out, uint32(start))
	}
	return out, nil
}

func countImportedGlobals(body []byte) (int, error) { return countImports(body, 0x03) }

// countImports counts the imports of one kind (0x00 function, 0x01
// table, 0x02 memory, 0x03 global, 0x04 tag) in an import section.
func countImports(body []byte, want byte) (int, error) {
	r := &wasmReader{b: body}
	n := r.u32()
	count := 0
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		kind := r.byte()
		switch kind {
		case 0x00: // function: type index
			r.u32()
		case 0x01: // table: reference type, limits
			r.valueType()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global: value type, mutability
			r.valueType()
			r.byte()
		case 0x04: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			r.fail("import kind %#x", kind)
		}
		if kind == want {
			count++
		}
	}
	return count, r.err
}

// instrumentCode rewrites every function body of a code section.
func instrumentCode(body []byte, global uint32) ([]byte, error) {
	r := &wasmReader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+len(body)/8), n)
	check := loopCheck(global, global+1)
	var fn []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
			break
		}
		var err error
		fn, err = instrumentFunction(fn[:0], code, check)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.err == nil && r.i != len(r.b) {
		r.fail("%d bytes after the last function", len(r.b)-r.i)
	}
	return out, r.err
}

// instrumentFunction copies one function body into out with check after
// the block type of every loop.
func instrumentFunction(out, code, check []byte) ([]byte, error) {
	r := &wasmReader{b: code}
	groups := r.u32()
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()  // count
		r.byte() // value type
	}
	from := 0 // code[from:r.i] is still to be copied
	for r.i < len(r.b) && r.err == nil {
		op := r.byte()
		if op == 0x03 { // loop
			r.blockType()
			out = append(out, code[from:r.i]...)
			out = append(out, check...)
			from = r.i
			continue
		}
		r.immediates(op)
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(out, code[from:]...), nil
}

// wasmReader reads the binary format; its methods record the first error
// and then read nothing.
type wasmReader struct {
	b   []byte
	i   int
	err error
	// base is what the errors wrap: errNotInstrumentable when nil.
	base error
}

func (r *wasmReader) fail(format string, args ...any) {
	if r.err == nil {
		base := r.base
		if base == nil {
			base = errNotInstrumentable
		}
		r.err = fmt.Errorf("%w: offset %d: %s", base, r.i, fmt.Sprintf(format, args...))
	}
	r.i = len(r.b)
}

func (r *wasmReader) byte() byte {
	if r.i >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *wasmReader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.i {
		r.fail("%d bytes run past the end", n)
		return nil
	}
	b := r.b[r.i : r.i+n]
	r.i += n
	return b
}

// leb skips a LEB128 number of at most maxBytes bytes and returns its low
// 32 bits (enough for every unsigned immediate of wasm32).
func (r *wasmReader) leb(maxBytes int) uint32 {
	var v uint32
	for n := 0; n < maxBytes; n++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if n < 5 {
			v |= uint32(c&0x7f) << (7 * n)
		}
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("LEB128 number too long")
	return 0
}

func (r *wasmReader) u32() uint32 { return r.leb(5) }
func (r *wasmReader) u64()        { r.leb(10) }

func (r *wasmReader) name() []byte { return r.bytes(int(r.u32())) }

func (r *wasmReader) limits() {
	flags := r.byte()
	if flags&^0x07 != 0 {
		r.fail("limits flags %#x", flags)
		return
	}
	read := r.u32
	if flags&0x04 != 0 { // 64-bit memory
		read = func() uint32 { r.u64(); return 0 }
	}
	read()
	if flags&0x01 != 0 {
		read()
	}
}

// blockType skips a block type: 0x40, a value type, or a type index
// (a signed 33-bit LEB128).
func (r *wasmReader) blockType() {
	if r.i >= len(r.b) {
		r.fail("unexpected end")
		return
	}
	switch c := r.b[r.i]; c {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.i++
	default:
		if c&0x40 != 0 && c&0x80 == 0 { // another negative one-byte code: a type this reader does not know
			r.fail("block type %#x", c)
			return
		}
		r.leb(5)
	}
}

func (r *wasmReader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.u64() // offset (64 bits with memory64)
}

// immediates skips the immediates of the instruction op, or fails on an
// opcode this reader does not know.
func (r *wasmReader) immediates(op byte) {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0a, op == 0x0b, op == 0x0f, op == 0x19, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1, op == 0xd3, op == 0xd4:
		// no immediates
	case op == 0x02, op == 0x03, op == 0x04, op == 0x06: // block, loop, if, try
		r.blockType()
	case op == 0x0c, op == 0x0d, op == 0x08, // br, br_if, throw
		op == 0x07, op == 0x09, op == 0x18, // catch, rethrow, delegate
		op >= 0x20 && op <= 0x26,                       // local.*, global.*, table.get/set
		op == 0x10, op == 0x12, op == 0x14, op == 0x15, // call, return_call, call_ref, return_call_ref
		op == 0xd2, op == 0xd5, op == 0xd6: // ref.func, br_on_null, br_on_non_null
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect: type, table
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.byte()
		}
	case op == 0x1f: // try_table: block type, catch clauses
		r.blockType()
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			switch kind := r.byte(); kind {
			case 0x00, 0x01: // catch, catch_ref: tag, label
				r.u32()
				r.u32()
			case 0x02, 0x03: // catch_all, catch_all_ref: label
				r.u32()
			default:
				r.fail("catch kind %#x", kind)
			}
		}
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f, op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41: // i32.const
		r.leb(5)
	case op == 0x42: // i64.const
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null: heap type
		r.leb(5)
	case op == 0xfc:
		r.prefixFC()
	case op == 0xfd:
		r.prefixSIMD()
	case op == 0xfe:
		r.prefixAtomic()
	default:
		r.fail("opcode %#x", op)
	}
}

func (r *wasmReader) prefixFC() {
	switch sub := r.u32(); {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init: data, memory
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	default:
		r.fail("opcode 0xfc %d", sub)
	}
}

func (r *wasmReader) prefixSIMD() {
	switch sub := r.u32(); {
	case sub <= 11, sub == 92, sub == 93: // loads, store, load32/64_zero
		r.memarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.memarg()
		r.byte()
	case sub <= 0x113: // the other SIMD and relaxed SIMD operations take none
	default:
		r.fail("opcode 0xfd %d", sub)
	}
}

func (r *wasmReader) prefixAtomic() {
	switch sub := r.u32(); {
	case sub == 3: // atomic.fence
		r.byte()
	case sub <= 0x4e:
		r.memarg()
	default:
		r.fail("opcode 0xfe %d", sub)
	}
}

// loopCheck is the code put at the head of every loop; see the top of
// this file.
func loopCheck(interrupt, fuel uint32) []byte {
	var b []byte
	op := func(code byte, index uint32) { b = appendU32(append(b, code), index) }
	const globalGet, globalSet = 0x23, 0x24
	op(globalGet, fuel)
	b = append(b, 0x41, 0x01, 0x6b) // i32.const 1, i32.sub
	op(globalSet, fuel)
	op(globalGet, fuel)
	b = append(b, 0x41, 0x00, 0x4c) // i32.const 0, i32.le_s
	b = append(b, 0x04, 0x40)       // if
	b = append(b, 0x41)             // i32.const yieldEvery
	b = appendS32(b, yieldEvery)
	op(globalSet, fuel)
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0, memory.grow 0, drop
	op(globalGet, interrupt)
	b = append(b, 0x04, 0x40, 0x00, 0x0b) // if, unreachable, end
	return append(b, 0x0b)                // end
}

// appendS32 appends v as a signed LEB128 number.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
