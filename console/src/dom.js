// Building the page: elements from a tag, attributes and children. Text is always set as text,
// never parsed as HTML, so names and traces from the cluster show as they are.

/**
 * An element `tag` with `attrs` (a function under an `on…` name becomes a listener; `false`,
 * `null` and `undefined` leave the attribute out) and `children` (elements or text).
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (typeof value === "function" && name.startsWith("on")) {
      element.addEventListener(name.slice(2), value);
    } else if (value !== false && value !== null && value !== undefined) {
      element.setAttribute(name, String(value));
    }
  }
  element.append(...children);
  return element;
}

/** `element`'s children replaced by `children`. */
export function replace(element, ...children) {
  element.replaceChildren(...children);
}
