;; v2.wasm: a plugin built for ABI major 2, to be refused before instantiation.
;; Build: wat2wasm v2.wat -o v2.wasm
(module
  (import "compact_host_v2" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "compact_plugin_abi_v2"))
  (func (export "compact_v2_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "compact_v2_free") (param i32))
  (data (i32.const 1024) "\43\48\46\01\6c\00\00\00\7b\22\62\6f\64\79\22\3a\7b\22\61\62\69\5f\6d\61\6a\6f\72\22\3a\32\2c\22\61\62\69\5f\6d\69\6e\6f\72\22\3a\30\2c\22\6e\61\6d\65\22\3a\22\76\32\22\2c\22\6b\69\6e\64\73\22\3a\5b\22\73\74\72\61\74\65\67\79\22\2c\22\74\72\75\6e\63\61\74\6f\72\22\5d\2c\22\63\61\74\65\67\6f\72\69\65\73\22\3a\5b\22\67\65\6e\65\72\69\63\22\5d\7d\7d\00\00\00\00")
  (func (export "compact_v2_info") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 120)))
)
