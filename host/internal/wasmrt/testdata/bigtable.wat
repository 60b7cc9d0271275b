;; bigtable.wasm: declares a table of 2^27 elements, which would take 1 GiB of
;; host memory per instance; the host refuses it before instantiation.
;; Build: wat2wasm bigtable.wat -o bigtable.wasm
(module
  (table 134217728 funcref)
  (memory (export "memory") 1)
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "compact_v1_free") (param i32))
  (func (export "compact_v1_info") (result i64) (i64.const 0))
)
