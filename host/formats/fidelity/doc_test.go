// Package fidelity_test checks that requests survive formats whole: the
// bodies the providers' official SDKs send, compactions and prunes through
// the engine, and the splicing a proxy does. It is a package of its own so
// that the formats package's tests and fuzzers do not build the SDKs and
// the engine.
package fidelity_test
