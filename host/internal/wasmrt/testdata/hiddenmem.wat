;; hiddenmem.wasm: a plugin whose memory is not exported as "memory", as the
;; ABI requires; the host must refuse it at load, naming the export.
;; Build: make hostile
(module
  (memory 2)
  ;; Bump allocator from 64 KiB up; free is a no-op. Enough for one call.
  (global $next (mut i32) (i32.const 65536))
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $size)))
    (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.shr_u (local.get $size) (i32.const 16)) (i32.const 1))))))
    (local.get $p))
  (func (export "compact_v1_free") (param i32))
  ;; The info frame lives at 1024; info returns (1024 << 32) | length.
  (data (i32.const 1024) "\43\48\46\01\6e\00\00\00\7b\22\62\6f\64\79\22\3a\7b\22\61\62\69\5f\6d\61\6a\6f\72\22\3a\31\2c\22\61\62\69\5f\6d\69\6e\6f\72\22\3a\30\2c\22\6e\61\6d\65\22\3a\22\68\69\64\65\22\2c\22\6b\69\6e\64\73\22\3a\5b\22\73\74\72\61\74\65\67\79\22\2c\22\74\72\75\6e\63\61\74\6f\72\22\5d\2c\22\63\61\74\65\67\6f\72\69\65\73\22\3a\5b\22\67\65\6e\65\72\69\63\22\5d\7d\7d\00\00\00\00")
  (func (export "compact_v1_info") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 122)))
)
