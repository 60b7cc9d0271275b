module github.com/compact-host/compact-host

go 1.26

require (
	github.com/compact-host/compact-host/abi v0.0.0-00010101000000-000000000000
	github.com/compact-host/compact-host/sdk v0.0.0-00010101000000-000000000000
)

replace (
	github.com/compact-host/compact-host/abi => ./abi
	github.com/compact-host/compact-host/sdk => ./sdk
)
