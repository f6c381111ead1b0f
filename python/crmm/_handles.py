"""Objects that own a libcrmm handle (a resource, a stream, a stream pool) and pickle.

A handle is an address in this process: a pickled copy would be a wild pointer in another
process, and a byte-for-byte copy in this one would free the handle twice. Such classes refuse
pickling with TypeError, as RMM's do; each says in its own __copy__ what a copy is (a new
reference to the same C object, or a refusal).
"""


class HandleOwner:
    """Mixin: pickling (every protocol) raises TypeError naming the class."""

    __slots__ = ()

    def __reduce_ex__(self, protocol):
        raise TypeError(
            f"cannot pickle {type(self).__name__}: it owns a libcrmm handle that is valid only in this process"
        )

    def __reduce__(self):
        return self.__reduce_ex__(2)
