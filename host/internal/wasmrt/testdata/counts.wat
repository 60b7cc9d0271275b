;; counts.wasm carries hostile modules that wabt refuses to write (it checks
;; a declared count against the bytes that follow, as the host does now). Each
;; is a passive data segment of this module, which wabt copies as it is: the
;; case's name, a NUL byte, then the module, written byte by byte. The tests
;; load each as a plugin; the comments say what each one declares.
;; Build: make hostile
(module

  ;; funcs: a function section declaring 4,294,967,295 functions and holding four:
  ;;   wazero made a 16 GiB slice for their type indices.
  (data "hostile/funcs\00"
    "\00\61\73\6d\01\00\00\00"  ;; magic, version 1
    "\01\11"  ;; type section: id 1, 17 bytes
    "\04"  ;; 4 types
    "\60\00\00"  ;; type 0: () -> ()
    "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
    "\60\01\7f\00"  ;; type 2: (i32) -> ()
    "\60\00\01\7e"  ;; type 3: () -> i64
    "\03\09"  ;; function section: id 3, 9 bytes
    "\ff\ff\ff\ff\0f"  ;; 4294967295 functions
    "\00\01\02\03"  ;; types 0, 1, 2, 3
    "\05\03"  ;; memory section: id 5, 3 bytes
    "\01\00\01"  ;; 1 memory: min 1 page, no max
    "\07\59"  ;; export section: id 7, 89 bytes
    "\05"  ;; 5 exports
    "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
    "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
    "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
    "\0a\11"  ;; code section: id 10, 17 bytes
    "\04"  ;; 4 function bodies
    "\02\00\0b"  ;; the marker: no locals, end
    "\04\00\41\00\0b"  ;; alloc: i32.const 0
    "\02\00\0b"  ;; free
    "\04\00\42\00\0b")  ;; info: i64.const 0

  ;; globals: a global section declaring 268,435,455 globals and holding one: wazero
  ;;   made a slice of them (several GiB) before reading the first.
  (data "hostile/globals\00"
    "\00\61\73\6d\01\00\00\00"  ;; magic, version 1
    "\01\11"  ;; type section: id 1, 17 bytes
    "\04"  ;; 4 types
    "\60\00\00"  ;; type 0: () -> ()
    "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
    "\60\01\7f\00"  ;; type 2: (i32) -> ()
    "\60\00\01\7e"  ;; type 3: () -> i64
    "\03\05"  ;; function section: id 3, 5 bytes
    "\04\00\01\02\03"  ;; 4 functions of types 0, 1, 2, 3
    "\05\03"  ;; memory section: id 5, 3 bytes
    "\01\00\01"  ;; 1 memory: min 1 page, no max
    "\06\09"  ;; global section: id 6, 9 bytes
    "\ff\ff\ff\7f"  ;; 268435455 globals
    "\7f\00\41\00\0b"  ;; i32, immutable, i32.const 0, end
    "\07\59"  ;; export section: id 7, 89 bytes
    "\05"  ;; 5 exports
    "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
    "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
    "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
    "\0a\11"  ;; code section: id 10, 17 bytes
    "\04"  ;; 4 function bodies
    "\02\00\0b"  ;; the marker: no locals, end
    "\04\00\41\00\0b"  ;; alloc: i32.const 0
    "\02\00\0b"  ;; free
    "\04\00\42\00\0b")  ;; info: i64.const 0

  ;; types: a type declaring 4,294,967,295 parameters in five bytes: wazero made a
  ;;   4 GiB slice of parameter types before reading the first.
  (data "hostile/types\00"
    "\00\61\73\6d\01\00\00\00"  ;; magic, version 1
    "\01\19"  ;; type section: id 1, 25 bytes
    "\05"  ;; 5 types
    "\60\00\00"  ;; type 0: () -> ()
    "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
    "\60\01\7f\00"  ;; type 2: (i32) -> ()
    "\60\00\01\7e"  ;; type 3: () -> i64
    "\60\ff\ff\ff\ff\0f\7f\00"  ;; type 4: (4294967295 params, one given) -> ()
    "\03\05"  ;; function section: id 3, 5 bytes
    "\04\00\01\02\03"  ;; 4 functions of types 0, 1, 2, 3
    "\05\03"  ;; memory section: id 5, 3 bytes
    "\01\00\01"  ;; 1 memory: min 1 page, no max
    "\07\59"  ;; export section: id 7, 89 bytes
    "\05"  ;; 5 exports
    "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
    "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
    "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
    "\0a\11"  ;; code section: id 10, 17 bytes
    "\04"  ;; 4 function bodies
    "\02\00\0b"  ;; the marker: no locals, end
    "\04\00\41\00\0b"  ;; alloc: i32.const 0
    "\02\00\0b"  ;; free
    "\04\00\42\00\0b")  ;; info: i64.const 0

  ;; data: a passive data segment declaring 4,294,967,295 bytes and holding four:
  ;;   wazero made the 4 GiB buffer before reading into it.
  (data "hostile/data\00"
    "\00\61\73\6d\01\00\00\00"  ;; magic, version 1
    "\01\11"  ;; type section: id 1, 17 bytes
    "\04"  ;; 4 types
    "\60\00\00"  ;; type 0: () -> ()
    "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
    "\60\01\7f\00"  ;; type 2: (i32) -> ()
    "\60\00\01\7e"  ;; type 3: () -> i64
    "\03\05"  ;; function section: id 3, 5 bytes
    "\04\00\01\02\03"  ;; 4 functions of types 0, 1, 2, 3
    "\05\03"  ;; memory section: id 5, 3 bytes
    "\01\00\01"  ;; 1 memory: min 1 page, no max
    "\07\59"  ;; export section: id 7, 89 bytes
    "\05"  ;; 5 exports
    "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
    "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
    "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
    "\0a\11"  ;; code section: id 10, 17 bytes
    "\04"  ;; 4 function bodies
    "\02\00\0b"  ;; the marker: no locals, end
    "\04\00\41\00\0b"  ;; alloc: i32.const 0
    "\02\00\0b"  ;; free
    "\04\00\42\00\0b"  ;; info: i64.const 0
    "\0b\0b"  ;; data section: id 11, 11 bytes
    "\01"  ;; 1 data segment
    "\01\ff\ff\ff\ff\0f\61\62\63\64")  ;; passive, 4294967295 bytes, then 4

  ;; elem: a passive element segment declaring 4,294,967,295 functions and holding
  ;;   one: wazero made a slice of 4 billion expressions (about 100 GiB).
  (data "hostile/elem\00"
    "\00\61\73\6d\01\00\00\00"  ;; magic, version 1
    "\01\11"  ;; type section: id 1, 17 bytes
    "\04"  ;; 4 types
    "\60\00\00"  ;; type 0: () -> ()
    "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
    "\60\01\7f\00"  ;; type 2: (i32) -> ()
    "\60\00\01\7e"  ;; type 3: () -> i64
    "\03\05"  ;; function section: id 3, 5 bytes
    "\04\00\01\02\03"  ;; 4 functions of types 0, 1, 2, 3
    "\05\03"  ;; memory section: id 5, 3 bytes
    "\01\00\01"  ;; 1 memory: min 1 page, no max
    "\07\59"  ;; export section: id 7, 89 bytes
    "\05"  ;; 5 exports
    "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
    "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
    "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
    "\09\09"  ;; element section: id 9, 9 bytes
    "\01"  ;; 1 element segment
    "\01\00\ff\ff\ff\ff\0f\00"  ;; passive, funcref, 4294967295 indices, then function 0
    "\0a\11"  ;; code section: id 10, 17 bytes
    "\04"  ;; 4 function bodies
    "\02\00\0b"  ;; the marker: no locals, end
    "\04\00\41\00\0b"  ;; alloc: i32.const 0
    "\02\00\0b"  ;; free
    "\04\00\42\00\0b")  ;; info: i64.const 0

  ;; names: a name section declaring 4,294,967,295 function names and holding one:
  ;;   wazero sized a map for all of them.
  (data "hostile/names\00"
    "\00\61\73\6d\01\00\00\00"  ;; magic, version 1
    "\01\11"  ;; type section: id 1, 17 bytes
    "\04"  ;; 4 types
    "\60\00\00"  ;; type 0: () -> ()
    "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
    "\60\01\7f\00"  ;; type 2: (i32) -> ()
    "\60\00\01\7e"  ;; type 3: () -> i64
    "\03\05"  ;; function section: id 3, 5 bytes
    "\04\00\01\02\03"  ;; 4 functions of types 0, 1, 2, 3
    "\05\03"  ;; memory section: id 5, 3 bytes
    "\01\00\01"  ;; 1 memory: min 1 page, no max
    "\07\59"  ;; export section: id 7, 89 bytes
    "\05"  ;; 5 exports
    "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
    "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
    "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
    "\0a\11"  ;; code section: id 10, 17 bytes
    "\04"  ;; 4 function bodies
    "\02\00\0b"  ;; the marker: no locals, end
    "\04\00\41\00\0b"  ;; alloc: i32.const 0
    "\02\00\0b"  ;; free
    "\04\00\42\00\0b"  ;; info: i64.const 0
    "\00\0f"  ;; custom section: id 0, 15 bytes
    "\04\6e\61\6d\65"  ;; the name section
    "\01\08"  ;; subsection 1: function names
    "\ff\ff\ff\ff\0f\00\01\6d")  ;; 4294967295 names, then function 0 named "m"

  ;; table40: a table of 134,217,728 elements (1 GiB of host memory per instance) in
  ;;   the form with an initialiser, 0x40 0x00 tabletype expr, which the old table
  ;;   check misread as a table of 112 elements.
  (data "hostile/table40\00"
    "\00\61\73\6d\01\00\00\00"  ;; magic, version 1
    "\01\11"  ;; type section: id 1, 17 bytes
    "\04"  ;; 4 types
    "\60\00\00"  ;; type 0: () -> ()
    "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
    "\60\01\7f\00"  ;; type 2: (i32) -> ()
    "\60\00\01\7e"  ;; type 3: () -> i64
    "\03\05"  ;; function section: id 3, 5 bytes
    "\04\00\01\02\03"  ;; 4 functions of types 0, 1, 2, 3
    "\04\0c"  ;; table section: id 4, 12 bytes
    "\01"  ;; 1 table
    "\40\00"  ;; the form with an initialiser
    "\70\00\80\80\80\40"  ;; funcref, limits without max, min 134217728
    "\d0\70\0b"  ;; ref.null func, end
    "\05\03"  ;; memory section: id 5, 3 bytes
    "\01\00\01"  ;; 1 memory: min 1 page, no max
    "\07\59"  ;; export section: id 7, 89 bytes
    "\05"  ;; 5 exports
    "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
    "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
    "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
    "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
    "\0a\11"  ;; code section: id 10, 17 bytes
    "\04"  ;; 4 function bodies
    "\02\00\0b"  ;; the marker: no locals, end
    "\04\00\41\00\0b"  ;; alloc: i32.const 0
    "\02\00\0b"  ;; free
    "\04\00\42\00\0b")  ;; info: i64.const 0
)
