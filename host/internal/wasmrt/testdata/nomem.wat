;; nomem.wasm: a plugin with no memory at all. The host reads requests and
;; answers through the exported memory, and dereferenced the missing one: a
;; nil pointer panic in the host at the first call. It must be a load error.
;; Build: make hostile
(module
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "compact_v1_free") (param i32))
  (func (export "compact_v1_info") (result i64) (i64.const 0))
  (func (export "compact_v1_truncate") (param i32 i32) (result i64) (i64.const 0))
)
