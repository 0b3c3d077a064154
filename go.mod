module github.com/novox/postgres-provider

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/jackc/pgx/v5 v5.13.0
	github.com/matryer/is v1.4.1
	github.com/spf13/afero v1.15.0
	golang.org/x/text v0.42.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.23.0 // indirect
)
