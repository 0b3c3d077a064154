// The kinds of the adapter's errors (ports.ErrRefused, ErrInvalid, ErrTransient).

package postgres

import "github.com/novox/postgres-provider/ports"

// kinded is an error of one of the kinds in ports (ErrRefused, ErrInvalid, ErrTransient), its
// text unchanged: what operators' alerts match on stays as it was, and the loop tells the kinds
// apart with errors.Is.
type kinded struct {
	err  error
	kind error
}

func (k kinded) Error() string   { return k.err.Error() }
func (k kinded) Unwrap() []error { return []error{k.err, k.kind} }

// refused is err of kind ports.ErrRefused: what exists and is not the provider's to take over.
func refused(err error) error { return kinded{err, ports.ErrRefused} }

// invalid is err of kind ports.ErrInvalid: what the consumer's entry asks for that can never
// be made.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return kinded{err, ports.ErrInvalid}
}

// transient is err of kind ports.ErrTransient: what may go away on its own.
func transient(err error) error { return kinded{err, ports.ErrTransient} }
