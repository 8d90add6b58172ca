from catalog_app.names import check_properties, check_property_keys
from lakeui.errors import ApplicationError


def properties_apply(
    current: dict[str, str], *, set_properties: dict | None, unset_properties: list | None
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The new properties, and what was really set and unset. Unsetting a key that is not set is refused."""
    to_set = check_properties(set_properties or {})
    to_unset = check_property_keys(unset_properties or [])
    both = set(to_set) & set(to_unset)
    if both:
        raise ApplicationError("invalid_properties", f"Properties {sorted(both)} are both set and unset.")
    missing = [key for key in to_unset if key not in current]
    if missing:
        raise ApplicationError("property_not_set", f"Cannot unset {missing}: not set.", details={"keys": missing})
    changed = {key: value for key, value in to_set.items() if current.get(key) != value}
    new = {key: value for key, value in current.items() if key not in to_unset} | to_set
    return new, changed, to_unset
