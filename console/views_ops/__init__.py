"""Operations pages of the console: dead letters (W8), delayed messages (W6), pending transactions
(W7), message trace (W13) and the live-tail page (W9). Views stay thin; what they show and do is
worked out by the modules in ``services`` over the admin client."""
