# core/adaptors.mk: library-wide logging switch and adaptor APIs
