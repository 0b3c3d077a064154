package postgres

import (
	"reflect"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// Every field of observed the server answers is the field of exactly one column of observeSQL,
// so that a field added to observed without its column fails here, not on a server.
func TestEachObservedFieldIsReadByOneColumn(t *testing.T) {
	is := is.New(t)
	var o observed
	fields := map[uintptr]string{}
	ty := reflect.TypeOf(o)
	base := reflect.ValueOf(&o).Pointer()
	for i := range ty.NumField() {
		if f := ty.Field(i); f.Name != "verifies" { // worked out by the caller, not read
			fields[base+f.Offset] = f.Name
		}
	}
	read := map[string]int{}
	for _, c := range observedColumns {
		name, ok := fields[reflect.ValueOf(c.into(&o)).Pointer()]
		is.True(ok) // each column reads into a field of observed
		read[name]++
	}
	for _, name := range fields {
		is.Equal(read[name], 1) // each field is read by one column
	}
}

// A column a reading does not ask for is answered by what stands in its place: no verifier is
// read where the provider may not read one, nor memberships, holdings or a claim where none is
// asked; a withdrawal reads no verifier and no memberships, and only a drop what the role holds.
func TestAColumnNotAskedForIsNotRead(t *testing.T) {
	is := is.New(t)
	all := observeSQL(forVerdict, true)
	for _, part := range []string{"au.rolpassword", "pg_authid au", "member_of (root", "granted_to (root", sqlMemberOf, sqlGrantedTo,
		sqlMembershipJoins, sqlOwns, sqlOwnsIn, sqlGrantedIn, "held AS", "ren.names", "MEMBER WITH ADMIN OPTION"} {
		is.True(strings.Contains(all, part)) // a verdict reads it all
	}
	is.True(!strings.Contains(observeSQL(forVerdict, false), "rolpassword")) // no verifier unless the provider may read it
	none := observeSQL(reading{}, true)
	for _, part := range []string{"rolpassword", "pg_authid au", "pg_auth_members", "member_of", "mo.", "gt.", "held", "ren.", "ADMIN"} {
		is.True(!strings.Contains(none, part)) // what is not asked is not read
	}
	withdrawal, drop := observeSQL(forWithdrawal, true), observeSQL(forDrop, true)
	for _, part := range []string{"rolpassword", "pg_auth_members"} {
		is.True(!strings.Contains(withdrawal, part)) // what a withdrawal does not weigh is not read
		is.True(!strings.Contains(drop, part))       // nor a drop
	}
	is.True(!strings.Contains(withdrawal, "held AS")) // what the role holds is a drop's to weigh
	is.True(strings.Contains(drop, "held AS"))
}
