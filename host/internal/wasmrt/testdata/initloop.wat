;; initloop.wasm: a hostile plugin for the host's tests. Its _initialize,
;; which runs when an instance is made, never returns.
;; Build: wat2wasm initloop.wat -o initloop.wasm
(module
  (memory (export "memory") 2)
  (func (export "_initialize") (loop $forever (br $forever)))
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param i32) (result i32) (i32.const 65536))
  (func (export "compact_v1_free") (param i32))
  (func (export "compact_v1_info") (result i64) (i64.const 0))
)
