# plugins/aligned: not built yet
