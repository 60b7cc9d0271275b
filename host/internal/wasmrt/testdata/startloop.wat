;; startloop.wasm: a hostile plugin for the host's tests. Its start
;; function, which wasm runs at instantiation, never returns.
;; Build: wat2wasm startloop.wat -o startloop.wasm
(module
  (memory (export "memory") 2)
  (func $start (loop $forever (br $forever)))
  (start $start)
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param i32) (result i32) (i32.const 65536))
  (func (export "compact_v1_free") (param i32))
  (func (export "compact_v1_info") (result i64) (i64.const 0))
)
