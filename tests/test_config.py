import pytest

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.errors import ConfigError


def test_round_trip_through_plain_values():
    options = IngestOptions(
        engine="cpu", batch_pages=50, pdf=PdfOptions(workers=1), engine_options={"lang": "eng"}
    )
    assert IngestOptions.from_dict(options.to_dict()) == options


@pytest.mark.parametrize(
    "values",
    [{"engin": "cpu"}, {"pdf": {"dpi": 300}}, {"chunk": {"max_token": 10}}],
)
def test_unknown_keys_are_rejected_with_the_name(values):
    with pytest.raises(ConfigError, match="unknown"):
        IngestOptions.from_dict(values)


@pytest.mark.parametrize(
    "values",
    [{"engine": "gpu"}, {"failed_page_budget": 1.5}, {"batch_pages": 0}, {"chunk": {"overlap_tokens": 600}}],
)
def test_out_of_range_values_are_rejected(values):
    with pytest.raises(ConfigError):
        IngestOptions.from_dict(values)
