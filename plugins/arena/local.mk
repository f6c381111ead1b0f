# plugins/arena: not built yet
