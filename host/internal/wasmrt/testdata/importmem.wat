;; importmem.wasm: a plugin importing its memory instead of exporting it. The
;; host provides functions only, so every instantiation failed to link, and
;; each call was reported as a trap; it must be a load error naming the import.
;; Build: make hostile
(module
  (import "compact_host_v1" "memory" (memory 1))
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "compact_v1_free") (param i32))
  (func (export "compact_v1_info") (result i64) (i64.const 0))
)
