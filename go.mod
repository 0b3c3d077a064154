module github.com/novox/postgres-provider

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/matryer/is v1.4.1
	github.com/spf13/afero v1.15.0
)

require golang.org/x/text v0.42.0 // indirect
