;; mirror.wasm: answers every call with the request bytes themselves, so a
;; fuzz test can hand the host any answer through a real module.
;; Build: wat2wasm mirror.wat -o mirror.wasm
(module
  (memory (export "memory") 2)
  (global $next (mut i32) (i32.const 65536))
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $size)))
    (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.shr_u (local.get $size) (i32.const 16)) (i32.const 1))))))
    (local.get $p))
  ;; Each call starts allocating afresh: the request is dead once answered.
  (func (export "compact_v1_free") (param i32)
    (global.set $next (i32.const 65536)))
  (data (i32.const 1024) "\43\48\46\01\70\00\00\00\7b\22\62\6f\64\79\22\3a\7b\22\61\62\69\5f\6d\61\6a\6f\72\22\3a\31\2c\22\61\62\69\5f\6d\69\6e\6f\72\22\3a\30\2c\22\6e\61\6d\65\22\3a\22\6d\69\72\72\6f\72\22\2c\22\6b\69\6e\64\73\22\3a\5b\22\73\74\72\61\74\65\67\79\22\2c\22\74\72\75\6e\63\61\74\6f\72\22\5d\2c\22\63\61\74\65\67\6f\72\69\65\73\22\3a\5b\22\67\65\6e\65\72\69\63\22\5d\7d\7d\00\00\00\00")
  (func (export "compact_v1_info") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 124)))
  (func $mirror (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))
  (func (export "compact_v1_summarize") (param i32 i32) (result i64) (call $mirror (local.get 0) (local.get 1)))
  (func (export "compact_v1_truncate") (param i32 i32) (result i64) (call $mirror (local.get 0) (local.get 1)))
)
