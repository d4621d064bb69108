"""One reader per pod per stream fanning each batch out to the connections: the ``hub`` follows the log and
keeps a ring of recent entries; the ``sweep`` hands what it read to the connections in rounds; each
connection's ``subscription`` is its mailbox; ``views`` the stream's filtered views, compiled and evaluated
once per pod for the connections of each."""
