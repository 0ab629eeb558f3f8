"""The pure core: SEMANTICS rules as functions of bytes and `now`. No I/O, no clock, no logs."""
