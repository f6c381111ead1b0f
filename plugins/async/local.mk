# plugins/async: not built yet
