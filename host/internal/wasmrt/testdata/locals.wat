;; locals.wasm: 64 functions each declaring 268,435,455 locals in one
;; entry of six bytes: wazero made a slice of every local type of each (256 MiB
;; apiece, 16 GiB in all) before compiling anything.
;; Written in the binary form, as the text format cannot declare
;; counts its entries do not fill. Build: make hostile
(module binary
  "\00asm" "\01\00\00\00"
  ;; type section
  "\01\11"  ;; id 1, 17 bytes
  "\04"  ;; 4 types
  "\60\00\00"  ;; type 0: () -> ()
  "\60\01\7f\01\7f"  ;; type 1: (i32) -> i32
  "\60\01\7f\00"  ;; type 2: (i32) -> ()
  "\60\00\01\7e"  ;; type 3: () -> i64
  ;; function section
  "\03\45"  ;; id 3, 69 bytes
  "\44"  ;; 68 functions
  "\00\01\02\03\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00"  ;; types 0, 1, 2, 3, then type 0
  ;; memory section
  "\05\03"  ;; id 5, 3 bytes
  "\01\00\01"  ;; 1 memory: min 1 page, no max
  ;; export section
  "\07\59"  ;; id 7, 89 bytes
  "\05"  ;; 5 exports
  "\06\6d\65\6d\6f\72\79\02\00"  ;; "memory": memory 0
  "\15\63\6f\6d\70\61\63\74\5f\70\6c\75\67\69\6e\5f\61\62\69\5f\76\31\00\00"  ;; the marker: function 0
  "\10\63\6f\6d\70\61\63\74\5f\76\31\5f\61\6c\6c\6f\63\00\01"  ;; alloc: function 1
  "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\66\72\65\65\00\02"  ;; free: function 2
  "\0f\63\6f\6d\70\61\63\74\5f\76\31\5f\69\6e\66\6f\00\03"  ;; info: function 3
  ;; code section
  "\0a\91\04"  ;; id 10, 529 bytes
  "\44"  ;; 68 function bodies
  "\02\00\0b"  ;; function 0: the marker, no locals, end
  "\04\00\41\00\0b"  ;; function 1: alloc, i32.const 0
  "\02\00\0b"  ;; function 2: free
  "\04\00\42\00\0b"  ;; function 3: info, i64.const 0
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
  "\07\01\ff\ff\ff\7f\7f\0b"  ;; a body of 7 bytes: 1 entry of 268435455 i32 locals, end
)
