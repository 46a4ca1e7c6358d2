"""The one id grammar (``core.ids``) and the parameter declarations (``core.params``):
every id ``faithbench list`` prints parses back to the object that wrote it, and so
does every id a user can make by setting declared parameters (a property test)."""

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faithbench import metrics, submissions, tasks
from faithbench.benchmark.core.errors import InputError
from faithbench.benchmark.core.ids import format_id, parse_id, short_name
from faithbench.benchmark.core.params import Param
from faithbench.benchmark.runner import check_explainer, configured


def _all_ids() -> list[str]:
    return ([t.spec.id for _, t in tasks.REGISTRY.items()]
            + [e.spec.id for _, e in submissions.REGISTRY.items()]
            + [m.spec.id for _, m in metrics.REGISTRY.items()])


@pytest.mark.parametrize("text", _all_ids())
def test_every_listed_id_formats_back_to_itself(text):
    parsed = parse_id(text)
    assert format_id(parsed.name, tuple(parsed.params.items()), parsed.version) == text
    assert short_name(text) == parsed.name


@pytest.mark.parametrize("name", list(metrics.REGISTRY.names()))
def test_every_metric_id_resolves_to_its_metric(name):
    metric = metrics.get_metric(name)
    assert metrics.resolve(metric.spec.id) == metric
    assert set(dict(metric.spec.params)) <= set(metrics.PARAMS)  # every parameter declared


@pytest.mark.parametrize("name", submissions.REFERENCE)
def test_every_explainer_id_resolves_to_its_explainer(name):
    explainer = submissions.get_explainer(name)
    assert check_explainer(explainer.spec.id) == explainer
    shown = {k for k, _ in explainer.spec.params}
    assert set(submissions.PARAMS.get(name, {})) <= shown  # only what the id shows is settable


def values(param: Param):
    """Every value the declaration accepts (a strategy)."""
    if param.choices is not None:
        one = st.sampled_from(param.choices)
    elif param.kind is str:  # a free name (e.g. a model's layer group)
        one = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
    elif param.kind is int:
        one = st.integers(min_value=-8 if param.low is None else int(param.low) + param.low_open,
                          max_value=64 if param.high is None else int(param.high))
    else:
        one = st.floats(min_value=param.low, max_value=param.high, allow_nan=False,
                        allow_infinity=False, exclude_min=param.low_open,
                        exclude_max=param.high_open)
    if param.tuple_of:
        one = st.lists(one, min_size=1, max_size=4).map(tuple)
    return st.one_of(st.none(), one) if param.optional else one


def settings_of(declared: dict[str, Param]):
    return st.fixed_dictionaries({}, optional={k: values(p) for k, p in declared.items()})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_declared_metric_setting_round_trips(data):
    metric = metrics.get_metric(data.draw(st.sampled_from(list(metrics.REGISTRY.names()))))
    keys = [k for k, _ in metric.spec.params]
    defaults = dict(metric.spec.params)
    declared = {k: dataclasses.replace(metrics.PARAMS[k], optional=metrics.PARAMS[k].optional
                                       and defaults[k] is None) for k in keys}
    chosen = data.draw(settings_of(declared))
    made = metrics.with_params(metric, **chosen)
    again = metrics.resolve(made.spec.id)
    assert again.spec == made.spec, made.spec.id
    assert metrics.resolve(made.spec.id).spec.id == made.spec.id


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_declared_explainer_setting_round_trips(data):
    name = data.draw(st.sampled_from(sorted(submissions.PARAMS)))
    chosen = data.draw(settings_of(submissions.PARAMS[name]))
    made = dataclasses.replace(submissions.get_explainer(name), **chosen)
    assert configured(made.spec.id) == made, made.spec.id


def test_a_one_value_tuple_is_one_spec_whichever_way_it_is_written():
    """Before: ``with_params(bins=[0.5]).spec.id`` printed ``bins=0.5``, which parsed
    back as a float: one id, two specs."""
    comp = metrics.get_metric("comprehensiveness")
    made = metrics.with_params(comp, bins=[0.5])
    assert made.spec.id.startswith("comprehensiveness[bins=0.5;")
    assert metrics.resolve(made.spec.id).spec == made.spec == metrics.with_params(comp, bins=0.5).spec


@pytest.mark.parametrize("ref, message", [
    ("comprehensiveness[bins=0]", "bins=(0,) is not one or more fractions in (0, 1]"),
    ("comprehensiveness[bins=0.1;bins=0.2]", "parameter 'bins' given twice"),
    ("comprehensiveness[bins=0.1", "expected name[key=value;...]@version"),
    ("comprehensiveness@", "nothing after '@'"),
    ("comprehensiveness@7", "version 7 requested, 2 registered"),
    ("flip_rate[segment=2]", "segment=2 is not None | 0 | 1"),
    ("flip_rate[erazer=mask]", "did you mean 'eraser'"),
    ("aopc_morf[k_max=0]", "k_max=0 is not int >= 1"),
    ("sufficiency[positive_only=1]", "positive_only=1 is not None | True | False"),
    ("segment_share[segment=None]", "segment cannot be None here"),
])
def test_bad_metric_ids_name_the_problem_and_what_can_be_set(ref, message):
    with pytest.raises(InputError) as caught:
        metrics.resolve(ref)
    assert message in str(caught.value)


@pytest.mark.parametrize("ref, message", [
    ("integrated_gradients[rows_per_pass=8]", "no settable parameter 'rows_per_pass'"),
    ("attention[heads=sum]", "heads='sum' is not None | mean | max"),
    ("attention[layer=1.5]", "layer=1.5 is not None | a layer index"),
    ("occlusion[granularity=char]", "granularity='char' is not None | word | subword"),
    ("gradient[norm=l1]", "norm is fixed at l2 (settable: none)"),
    ("gradient[p=2]", "no settable parameter 'p' (settable: none)"),
    ("attention@2", "version 2 requested, 1 registered"),
])
def test_bad_explainer_ids_name_the_problem(ref, message):
    with pytest.raises(InputError) as caught:
        check_explainer(ref)
    assert message in str(caught.value)
