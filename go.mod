module github.com/podfence/podfence

go 1.26.8

require (
	github.com/spf13/cobra v1.10.2
	k8s.io/utils v0.0.0-20260707023825-cf1189d6abe3
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
)
