package pgserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// execOn runs sql on s, or answers why it could not.
func execOn(s *Server, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func TestAStandbyFollowsItsPrimaryAndIsPromoted(t *testing.T) {
	is := is.New(t)
	primary, err := Start(Options{})
	is.NoErr(err) // a primary
	defer primary.Stop()
	standby, err := primary.StartStandby(Options{})
	is.NoErr(err) // and its standby
	defer standby.Stop()
	is.True(standby.Port != primary.Port) // a port of its own
	is.True(standby.Dir != primary.Dir)   // and a folder

	ctx := context.Background()
	recovering, err := standby.Recovering(ctx)
	is.NoErr(err)
	is.True(recovering)                                             // a standby
	is.True(execOn(standby, "CREATE TABLE refused (n int)") != nil) // read only
	is.NoErr(execOn(primary, "CREATE TABLE streamed (n int)"))
	eventually(t, "the standby has what the primary wrote", func() bool { return execOn(standby, "SELECT * FROM streamed") == nil })

	data := filepath.Join(primary.Dir, "data")
	primary.StopImmediate()
	is.Equal(postmaster(data), 0) // stopped
	_, err = os.Stat(filepath.Join(data, "PG_VERSION"))
	is.NoErr(err) // its folder kept until Stop
	is.True(!takesConnections(primary))

	is.NoErr(standby.Promote())
	recovering, err = standby.Recovering(ctx)
	is.NoErr(err)
	is.True(!recovering)                                         // a primary now
	is.NoErr(execOn(standby, "INSERT INTO streamed VALUES (1)")) // that takes writes
	is.NoErr(primary.Stop())
	_, err = os.Stat(primary.Dir)
	is.True(os.IsNotExist(err)) // gone with Stop
	sdata := filepath.Join(standby.Dir, "data")
	is.NoErr(standby.Stop())
	is.Equal(postmaster(sdata), 0) // the standby stopped too
}
