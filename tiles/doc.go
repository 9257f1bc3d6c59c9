// Package tiles publishes a tenant's Merkle log in the C2SP tlog-tiles
// layout (https://c2sp.org/tlog-tiles) and reads it back as a client.
//
// The layout is a set of static resources under a prefix: the signed
// checkpoint at "checkpoint", hash tiles at "tile/<L>/<N>[.p/<W>]" and entry
// bundles at "tile/entries/<N>[.p/<W>]". Any static file server or CDN can
// serve it, and any tlog-tiles client (golang.org/x/mod/sumdb/tlog with tile
// height 8, Tessera's client) can build inclusion and consistency proofs
// from it; the server computes none. spec/tiles.md is the normative text.
//
// # Invariants
//
//   - A log entry is the leaf value: the sealed run's 32-byte terminal chain
//     hash. Level-0 tile hashes are SHA-256(0x00 || entry); a level-L hash is
//     the RFC 6962 root of the 256^L leaves below it.
//   - Everything this package produces from a [Source] is bounded by the
//     newest signed checkpoint: a tile or bundle that the checkpoint does not
//     imply is [ErrNotFound], so a reader never sees a hash before the log
//     has signed a tree containing it. Full tiles, and partial tiles of a
//     given width, never change once they exist.
//   - [Sync] writes a directory so that its checkpoint is always backed by
//     the tiles it implies: every tile is written to a temporary file,
//     fsynced and renamed into place, the directories are fsynced, and only
//     then is the checkpoint renamed into place, last.
//   - The client side ([Tree]) trusts only a (size, root) pair the caller
//     took from a verified checkpoint. Every tile it uses is checked for its
//     exact width and authenticated against that root before any hash in it
//     is used; a tile that fails names itself in a [*TileError].
package tiles
