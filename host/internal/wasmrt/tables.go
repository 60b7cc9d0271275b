package wasmrt

// A table can grow at run time (table.grow) up to its declared maximum,
// or, with none, up to wazero's own bound of 2^27 elements: a few
// instructions made the host allocate gigabytes outside the plugin's
// memory limit. Go's linker declares its table without a maximum, so
// refusing such tables would refuse every Go plugin. Instead the host
// writes a maximum into the table section before compiling: each table
// keeps its declared maximum when it fits, and otherwise gets its
// initial size plus an equal share of what maxTableElements leaves after
// every table's initial size. table.grow past the maximum returns -1, as
// the spec lets any grow fail; neither Go nor C toolchains grow tables.

// boundTables returns bin with every defined table's maximum within the
// share described above, or bin itself when every table already has
// one. shape is what precheck read of bin.
func boundTables(bin []byte, shape *moduleShape) []byte {
	if len(shape.tables) == 0 {
		return bin
	}
	var sum int64
	for _, t := range shape.tables {
		sum += t.min
	}
	share := (maxTableElements - sum) / int64(len(shape.tables))
	bound := func(t tableLimits) int64 {
		if t.max >= 0 && t.max <= t.min+share {
			return t.max
		}
		return t.min + share
	}
	changed := false
	for _, t := range shape.tables {
		changed = changed || bound(t) != t.max
	}
	if !changed {
		return bin
	}
	// Tables are numbered imports first; precheck refuses a module whose
	// sections it cannot read, so this walk reads what it already read.
	imported := 0
	out := make([]byte, 0, len(bin)+8*len(shape.tables))
	out = append(out, bin[:8]...)
	r := &wasmReader{b: bin, i: 8, base: errMalformed}
	for r.i < len(r.b) && r.err == nil {
		id := r.byte()
		size := int(r.u32())
		body := r.bytes(size)
		if r.err != nil {
			break
		}
		switch id {
		case secImport:
			n, _ := countImports(body, 0x01)
			imported = n
		case secTable:
			body = rewriteTableSection(body, shape.tables[imported:], bound)
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.err != nil {
		return bin // unreachable after precheck; wazero reports it
	}
	return out
}

// rewriteTableSection re-encodes each table's limits as (min, bound(t)).
func rewriteTableSection(body []byte, tables []tableLimits, bound func(tableLimits) int64) []byte {
	r := &wasmReader{b: body, base: errMalformed}
	n := int(r.u32())
	out := appendU32(make([]byte, 0, len(body)+8*n), uint32(n))
	for i := 0; i < n && i < len(tables) && r.err == nil; i++ {
		start := r.i
		withInit := r.i < len(r.b) && r.b[r.i] == 0x40
		if withInit {
			r.byte()
			r.byte()
		}
		r.valueType()
		out = append(out, body[start:r.i]...)
		r.limits()
		out = append(out, 0x01)
		out = appendU32(out, uint32(tables[i].min))
		out = appendU32(out, uint32(bound(tables[i])))
		start = r.i
		if withInit {
			r.constExpr()
		}
		out = append(out, body[start:r.i]...)
	}
	return append(out, body[r.i:]...)
}
