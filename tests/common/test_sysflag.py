"""Which stored records consumers see: the one rule the commit log, dispatch and the broker share."""

from broker.common import sysflag


def test_prepared_and_rolled_back_records_are_hidden_from_consumers():
    hidden = {sysflag.TRANSACTION_PREPARED_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE}
    for transaction_type in (
        sysflag.TRANSACTION_NOT_TYPE,
        sysflag.TRANSACTION_PREPARED_TYPE,
        sysflag.TRANSACTION_COMMIT_TYPE,
        sysflag.TRANSACTION_ROLLBACK_TYPE,
    ):
        for other_bits in (0, sysflag.COMPRESSED_FLAG | sysflag.BORNHOST_V6_FLAG):
            flag = transaction_type | other_bits
            assert sysflag.visible_to_consumers(flag) is (transaction_type not in hidden)
