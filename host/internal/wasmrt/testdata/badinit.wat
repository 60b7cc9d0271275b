;; badinit.wasm: a plugin whose _initialize takes a parameter, which the ABI
;; says it does not (() -> ()); the host must refuse it at load, naming the
;; export, before calling it with nothing.
;; Build: make hostile
(module
  (memory (export "memory") 1)
  (func (export "compact_plugin_abi_v1"))
  (func (export "compact_v1_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "compact_v1_free") (param i32))
  (func (export "compact_v1_info") (result i64) (i64.const 0))
  (func (export "_initialize") (param i32))
)
