package domain

import (
	"crypto/sha256"
)

// takeListing marks who the file lists, and the files worth watching. Both change only when
// the file does; so does what the loop forgets of consumers that left it.
func (h *Harness) takeListing(given []contribution) {
	if h.watched != nil && h.listedFor == h.file.digest {
		return
	}
	watched := make([]string, 0, len(given)+1)
	watched = append(watched, h.cfg.Receives)
	for _, g := range given {
		watched = append(watched, g.Secret)
	}
	h.consumers.list(given)
	h.listedFor, h.watched = h.file.digest, watched
}

// readSecrets reads each listed consumer's secret and makes what it asks for. The items are
// the pass's own, in memory reused from the pass before.
func (h *Harness) readSecrets(given []contribution) []*item {
	if cap(h.items) < len(given) {
		h.items, h.itemPtrs = make([]item, len(given)), make([]*item, len(given))
	}
	items := h.itemPtrs[:len(given)]
	h.phase("reading secrets", len(given))
	for i, g := range given {
		if i > 0 && i%secretsCounted == 0 {
			h.returned(secretsCounted, nil) // progress: "reading secrets: 40,960 of 100,000"
		}
		it := &h.items[i]
		c := h.consumers.add(g.As)
		*it = item{c: c, g: &given[i], index: i}
		items[i] = it
		pw, unreadable, refused := h.readSecret(c, g.Secret)
		if unreadable != nil || refused != nil {
			it.unreadable, it.refused = unreadable, refused
			continue
		}
		c.waiting, c.refusedSecret = 0, nil // a refusal that comes back after a usable secret is said again
		h.consumers.setPassword(c, pw)
		it.hash = fingerprint(c, g, pw)
	}
	h.noteFolders(items)
	h.phaseDone()
	return items
}

// secretsCounted is how many secrets are read between two moves of the pass's progress.
const secretsCounted = 1024

// fingerprint is what g asks for under password pw, as a digest, so the loop's memory keeps no
// password in it. It is kept with c's secret, and made again only when the password or what g
// asks for changed.
func fingerprint(c *consumer, g contribution, pw string) [sha256.Size]byte {
	m := &c.memo
	if m.password == pw && m.shape == g.shape && m.hashed {
		return m.hash
	}
	sum := sha256.New()
	sum.Write(g.shape[:])
	sum.Write([]byte(pw))
	var hash [sha256.Size]byte
	sum.Sum(hash[:0])
	if m.password == pw {
		m.shape, m.hash, m.hashed = g.shape, hash, true
	}
	return hash
}

// pending walks items once for what makes a pass use the backend though it is no verify pass:
// a check the last pass left unanswered, or a consumer not applied as it now asks (changed);
// and else whether a costly part of a check on its budget is due (partDue). One walk: an idle
// pass at many consumers makes it every time.
func (h *Harness) pending(items []*item) (changed, partDue bool) {
	budgeted := [parts]bool{h.budgeted(login), h.budgeted(inside)}
	now := h.clock.Now()
	for _, it := range items {
		c := it.c
		if c.isUnasked || it.usable() && (!c.applied || c.hash != it.hash) {
			return true, false
		}
		for p := range parts {
			partDue = partDue || budgeted[p] && it.due(p, now)
		}
	}
	return false, partDue
}
