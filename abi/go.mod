module github.com/compact-host/compact-host/abi

go 1.26
