package wasmrt

import (
	"errors"
	"fmt"

	"github.com/compact-host/compact-host/abi"
)

// wazero's decoder sizes its slices from the counts a module declares
// (make([]T, count)) before it reads the entries, and its compiler's cost
// grows faster than linearly with the nesting of blocks. A file of a few
// hundred bytes declaring 2^32 locals or a 4 GiB data segment made the
// host allocate tens of GiB and die ("fatal error: out of memory"), and
// 100,000 nested blocks held a load for minutes. So the host reads every
// section itself first, in one bounded pass, and refuses what is over the
// limits below before wazero sees a byte.
//
// Two rules bound every declaration. A vector's count must fit the bytes
// that follow it (each entry takes at least one byte), so nothing is
// allocated out of proportion to the file. And the counts that bytes do
// not bound (locals: one entry declares up to 2^32 of them; nesting) or
// that cost more than their bytes have limits of their own, most of them
// the implementation limits of the WebAssembly JS API, which every
// browser enforces, so a module that runs in a browser is not refused
// here for its size. abi/README.md (Limits) lists them.
const (
	maxModuleBytes    = 64 << 20  // a Go plugin is 3–5 MiB
	maxTypes          = 1_000_000 // JS API
	maxFunctions      = 1_000_000 // JS API, imported and defined
	maxImports        = 100_000   // JS API
	maxExports        = 100_000   // JS API
	maxGlobals        = 1_000_000 // JS API
	maxDataSegments   = 100_000   // JS API
	maxElemSegments   = 100_000   // JS API allows 10 million; bytes bound them anyway
	maxTables         = 100_000   // JS API
	maxParams         = 1_000     // JS API
	maxResults        = 1_000     // JS API
	maxFunctionBytes  = 7_654_321 // JS API
	maxFunctionLocals = 50_000    // JS API
	// maxModuleLocals bounds the locals of all functions together: 50,000
	// in each of a million functions would be 50 GiB of local types.
	maxModuleLocals = 1 << 24
	// maxNesting bounds the depth of nested blocks, loops, ifs and trys
	// in one function, and maxNestingWork the sum, over every one of
	// them in the module, of its depth. wazero's compiler spends time on
	// each block in proportion to its depth (2,000 nested loops took it
	// 2 s, 5,000 took 9 s, 100,000 over ten minutes), so the sum is what
	// bounds a load's compile time. The built-in plugins nest 550 deep
	// and sum to 3.5 million.
	maxNesting     = 2_000
	maxNestingWork = 1 << 24
)

// maxTableElements bounds the elements of a module's tables together,
// counted at their maximum. wazero allocates a table's elements (8 bytes
// each) in host memory at instantiation and at table.grow, outside the
// linear-memory limit: a table of 2^27 entries took 1 GiB of the host's
// memory per instance. A Go-built plugin declares a few thousand.
const maxTableElements = 1 << 20

// errMalformed marks a module the pre-check cannot read.
var errMalformed = errors.New("malformed module")

// errOverLimit marks a module whose declarations are over a limit.
var errOverLimit = errors.New("over a limit of this host (abi/README.md, Limits)")

// Section ids the pre-check reads, besides those of interrupt.go.
const (
	secType     = 1
	secFunction = 3
	secTable    = 4
	secMemory   = 5
	secElement  = 9
	secData     = 11
)

// moduleShape is what the pre-check learnt of a module that passed it.
type moduleShape struct {
	importedFuncs int
	tables        []tableLimits
	// depth is the deepest nesting of any function, depthSum the sum
	// that maxNestingWork bounds, and locals the functions' locals
	// together; the tests hold real plugins to them.
	depth    int
	depthSum int64
	locals   int64
}

// tableLimits are a table's limits as declared; max is -1 without one.
type tableLimits struct{ min, max int64 }

// precheck reads bin's sections linearly, checking every length against
// the bytes that hold it, and refuses a module whose declarations are
// over the limits above. It allocates nothing in proportion to what the
// module declares.
func precheck(bin []byte) (*moduleShape, error) {
	if len(bin) > maxModuleBytes {
		return nil, fmt.Errorf("%w: the file is %d bytes, over the limit of %d", errOverLimit, len(bin), maxModuleBytes)
	}
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: no wasm magic number at the start (is it a .wasm binary?)", errMalformed)
	}
	if string(bin[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("%w: binary format version %x, want 1", errMalformed, bin[4:8])
	}
	c := &checker{shape: &moduleShape{}}
	r := c.reader(bin, 8, len(bin))
	for r.i < len(r.b) && r.err == nil {
		at := r.i
		id := r.byte()
		size := int(r.u32())
		if r.err != nil {
			break
		}
		if size > len(r.b)-r.i {
			return nil, fmt.Errorf("%w: section %d at offset %d runs past the end of the file", errMalformed, id, at)
		}
		c.section(id, c.reader(bin, r.i, r.i+size))
		if c.err != nil {
			return nil, c.err
		}
		r.i += size
	}
	if r.err != nil {
		return nil, r.err
	}
	return c.shape, nil
}

type checker struct {
	shape *moduleShape
	err   error
}

func (c *checker) reader(bin []byte, from, to int) *wasmReader {
	return &wasmReader{b: bin[:to], i: from, base: errMalformed}
}

func (c *checker) over(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", errOverLimit, fmt.Sprintf(format, args...))
	}
}

// count reads a vector's length and checks it against the bytes left,
// at least minBytes an entry, and against limit.
func (c *checker) count(r *wasmReader, what string, minBytes int, limit int64) int {
	at := r.i
	n := int64(r.u32())
	switch {
	case r.err != nil:
	case n > limit:
		c.over("%s: %d at offset %d, over the limit of %d", what, n, at, limit)
	case n*int64(minBytes) > int64(len(r.b)-r.i):
		r.fail("%s: %d declared, but only %d bytes follow", what, n, len(r.b)-r.i)
	default:
		return int(n)
	}
	return 0
}

func (c *checker) section(id byte, r *wasmReader) {
	switch id {
	case secType:
		c.types(r)
	case secImport:
		c.imports(r)
	case secFunction:
		n := c.count(r, "functions", 1, int64(maxFunctions-c.shape.importedFuncs))
		for i := 0; i < n && r.err == nil; i++ {
			r.u32()
		}
	case secTable:
		n := c.count(r, "tables", 2, maxTables-int64(len(c.shape.tables)))
		for i := 0; i < n && r.err == nil; i++ {
			c.table(r, true)
		}
		c.tableBudget()
	case secMemory:
		n := c.count(r, "memories", 2, 1)
		for i := 0; i < n && r.err == nil; i++ {
			c.memory(r)
		}
	case secGlobal:
		// An entry is a type, a mutability and an expression: the count
		// alone bounds what the decoder allocates.
		c.count(r, "globals", 3, maxGlobals)
		c.countOnly(r)
		return
	case secExport:
		c.count(r, "exports", 3, maxExports)
		c.countOnly(r)
		return
	case secElement:
		n := c.count(r, "element segments", 2, maxElemSegments)
		for i := 0; i < n && r.err == nil; i++ {
			c.element(r)
		}
	case secDataCount:
		r.u32()
	case secCode:
		n := c.count(r, "function bodies", 2, maxFunctions)
		for i := 0; i < n && r.err == nil && c.err == nil; i++ {
			c.function(r, i)
		}
	case secData:
		n := c.count(r, "data segments", 2, maxDataSegments)
		for i := 0; i < n && r.err == nil; i++ {
			c.data(r)
		}
	case secCustom:
		c.custom(r)
		return
	default:
		// wazero refuses the sections it does not know; tag sections
		// (13) have fixed-size entries.
		if id == secTag {
			c.count(r, "tags", 2, maxTypes)
			c.countOnly(r)
		}
		return
	}
	if r.err == nil && c.err == nil && r.i != len(r.b) {
		r.fail("section %d has %d bytes after its last entry", id, len(r.b)-r.i)
	}
	if c.err == nil {
		c.err = r.err
	}
}

// countOnly ends a section whose entries are not read: its count is all
// that sizes wazero's allocation.
func (c *checker) countOnly(r *wasmReader) {
	if c.err == nil {
		c.err = r.err
	}
}

func (c *checker) types(r *wasmReader) {
	n := c.count(r, "types", 1, maxTypes)
	total := 0
	for i := 0; i < n && r.err == nil && c.err == nil; i++ {
		group := 1
		if r.i < len(r.b) && r.b[r.i] == 0x4e { // a recursion group
			r.byte()
			group = c.count(r, "types in a recursion group", 3, maxTypes)
		}
		for j := 0; j < group && r.err == nil; j++ {
			if form := r.byte(); form != 0x60 {
				r.fail("type form %#x, want a function type (0x60)", form)
			}
			for _, what := range []struct {
				name  string
				limit int64
			}{{"parameters", maxParams}, {"results", maxResults}} {
				m := c.count(r, what.name, 1, what.limit)
				for k := 0; k < m && r.err == nil; k++ {
					r.valueType()
				}
			}
		}
		if total += group; total > maxTypes {
			c.over("types: more than %d", maxTypes)
		}
	}
}

func (c *checker) imports(r *wasmReader) {
	n := c.count(r, "imports", 4, maxImports)
	for i := 0; i < n && r.err == nil && c.err == nil; i++ {
		module, name := r.name(), r.name()
		kind := r.byte()
		if kind != 0x00 && r.err == nil && c.err == nil {
			// wazero would refuse the link at every instantiation, which
			// the host would report as a trap of each call.
			c.err = fmt.Errorf("imports %s %s.%s; the host provides functions only", importKinds[kind], module, name)
		}
		if kind == 0x00 && string(module) == "env" && r.err == nil && c.err == nil {
			// Toolchains import from env what they left undefined; the
			// host's own modules never are env, so name the fix.
			c.err = envImportError(string(name))
		}
		switch kind {
		case 0x00:
			r.u32()
			if c.shape.importedFuncs++; c.shape.importedFuncs > maxFunctions {
				c.over("functions: more than %d imported", maxFunctions)
			}
		case 0x01:
			c.table(r, false)
		case 0x02:
			c.memory(r)
		case 0x03:
			r.valueType()
			r.byte()
		case 0x04:
			r.byte()
			r.u32()
		default:
			r.fail("import kind %#x", kind)
		}
	}
}

// envImportError is the error of a function imported from "env".
func envImportError(name string) error {
	if name == "abort" {
		return fmt.Errorf("imports env.abort, which the host does not provide: AssemblyScript's default abort; " +
			"build with --use abort=~lib/compact-host-sdk/index/pluginAbort (the SDK's abort, which reports through the host's log)")
	}
	return fmt.Errorf("imports env.%s, which the host does not provide: a function the toolchain left undefined; "+
		"define or link it, since a plugin may import only the host module %s and WASI", name, abi.HostModule)
}

var importKinds = map[byte]string{0x01: "the table", 0x02: "the memory", 0x03: "the global", 0x04: "the tag"}

// table reads a table type, in the definition's 0x40 0x00 form (with an
// initialiser) too when defined.
func (c *checker) table(r *wasmReader, defined bool) {
	withInit := false
	if defined && r.i < len(r.b) && r.b[r.i] == 0x40 {
		r.byte()
		if b := r.byte(); b != 0x00 {
			r.fail("table prefix 0x40 %#x, want 0x40 0x00", b)
		}
		withInit = true
	}
	r.valueType()
	min, max := c.limits(r, "table")
	if withInit {
		r.constExpr()
	}
	if r.err == nil {
		c.shape.tables = append(c.shape.tables, tableLimits{min, max})
	}
}

// tableBudget refuses tables whose initial sizes together are over
// maxTableElements; boundTables gives each a maximum within it.
func (c *checker) tableBudget() {
	var sum int64
	for _, t := range c.shape.tables {
		sum += t.min
	}
	if sum > maxTableElements {
		c.over("tables start with %d elements together, over the limit of %d", sum, maxTableElements)
	}
}

func (c *checker) memory(r *wasmReader) {
	c.limits(r, "memory")
}

// limits reads limits; max is -1 when absent. 64-bit limits are refused:
// the ABI's pointers are 32-bit.
func (c *checker) limits(r *wasmReader, what string) (min, max int64) {
	flags := r.byte()
	if flags > 0x03 {
		r.fail("%s limits flags %#x: only 32-bit limits (0x00 to 0x03)", what, flags)
		return 0, -1
	}
	min, max = int64(r.u32()), -1
	if flags&0x01 != 0 {
		max = int64(r.u32())
	}
	return min, max
}

func (c *checker) element(r *wasmReader) {
	flags := r.u32()
	if flags > 7 {
		r.fail("element segment flags %d", flags)
		return
	}
	if flags&0x02 != 0 && flags&0x01 == 0 { // 2 and 6: a table index
		r.u32()
	}
	if flags&0x01 == 0 { // active: an offset
		r.constExpr()
	}
	exprs := flags&0x04 != 0
	if flags&0x03 != 0 { // 1, 2, 3, 5, 6, 7: an element kind or type
		if exprs {
			r.valueType()
		} else {
			r.byte()
		}
	}
	n := c.count(r, "elements of a segment", 1, maxTableElements)
	for i := 0; i < n && r.err == nil; i++ {
		if exprs {
			r.constExpr()
		} else {
			r.u32()
		}
	}
}

func (c *checker) data(r *wasmReader) {
	switch flags := r.u32(); flags {
	case 0:
		r.constExpr()
	case 1:
	case 2:
		r.u32()
		r.constExpr()
	default:
		r.fail("data segment flags %d", flags)
		return
	}
	n := c.count(r, "bytes of a data segment", 1, maxModuleBytes)
	r.bytes(n)
}

// function reads one body: its locals against their limits and its
// instructions for the depth of their nesting.
func (c *checker) function(r *wasmReader, index int) {
	size := int(r.u32())
	if r.err != nil {
		return
	}
	if size > maxFunctionBytes {
		c.over("function %d is %d bytes, over the limit of %d", index, size, maxFunctionBytes)
		return
	}
	if size > len(r.b)-r.i {
		r.fail("function %d runs past the code section", index)
		return
	}
	body := &wasmReader{b: r.b[:r.i+size], i: r.i, base: errMalformed}
	r.i += size
	groups := c.count(body, "local declarations", 2, maxFunctionLocals)
	var locals int64
	for i := 0; i < groups && body.err == nil; i++ {
		locals += int64(body.u32())
		body.valueType()
		if locals > maxFunctionLocals {
			c.over("function %d declares %d locals or more, over the limit of %d", index, locals, maxFunctionLocals)
			return
		}
	}
	if c.shape.locals += locals; c.shape.locals > maxModuleLocals {
		c.over("the functions declare %d locals together, over the limit of %d", c.shape.locals, maxModuleLocals)
		return
	}
	depth := 1 // the function's own block
	for body.i < len(body.b) && body.err == nil {
		at := body.i
		op := body.byte()
		switch op {
		case 0x02, 0x03, 0x04, 0x06, 0x1f: // block, loop, if, try, try_table
			if depth++; depth > maxNesting {
				c.over("function %d nests blocks deeper than %d at offset %d", index, maxNesting, at)
				return
			}
			c.shape.depth = max(c.shape.depth, depth)
			if c.shape.depthSum += int64(depth); c.shape.depthSum > maxNestingWork {
				c.over("the depths of the module's blocks sum to more than %d, the limit (in function %d, offset %d)", maxNestingWork, index, at)
				return
			}
		case 0x0b, 0x18: // end, delegate
			depth--
			if depth == 0 && body.i != len(body.b) {
				body.fail("function %d has code after its last end", index)
			}
		}
		body.immediates(op)
	}
	if body.err == nil && depth != 0 {
		body.fail("function %d does not end", index)
	}
	if body.err != nil {
		r.err = body.err
	}
}

// custom checks the name section, whose maps wazero sizes from their
// declared counts; other custom sections are kept as bytes, if at all.
func (c *checker) custom(r *wasmReader) {
	if string(r.name()) != "name" || r.err != nil {
		return
	}
	for r.i < len(r.b) && r.err == nil && c.err == nil {
		id := r.byte()
		size := int(r.u32())
		if r.err != nil || size > len(r.b)-r.i {
			return // wazero stops at a broken name section, too
		}
		sub := &wasmReader{b: r.b[:r.i+size], i: r.i, base: errMalformed}
		r.i += size
		switch id {
		case 1: // function names: index, name
			c.names(sub)
		case 2: // local names: index, then a name map
			n := c.count(sub, "names", 2, maxFunctions)
			for i := 0; i < n && sub.err == nil && c.err == nil; i++ {
				sub.u32()
				c.names(sub)
			}
		}
		if c.err == nil && sub.err != nil {
			c.err = sub.err
		}
	}
}

func (c *checker) names(r *wasmReader) {
	n := c.count(r, "names", 2, maxFunctions)
	for i := 0; i < n && r.err == nil; i++ {
		r.u32()
		r.name()
	}
}

// valueType reads a value type: one byte, or a reference type prefix
// (0x63, 0x64) and a heap type.
func (r *wasmReader) valueType() {
	switch b := r.byte(); b {
	case 0x63, 0x64:
		r.leb(5)
	}
}

// constExpr reads a constant expression up to its end.
func (r *wasmReader) constExpr() {
	for r.err == nil {
		op := r.byte()
		if op == 0x0b {
			return
		}
		r.immediates(op)
	}
}
