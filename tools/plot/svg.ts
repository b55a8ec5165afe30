// Writes a chart scene as inline SVG: no external fonts or styles, titled and described for screen readers.
import type { Scene, Shape } from './layout.ts';

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&${{ '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot', "'": 'apos' }[c]};`);
}

/** One decimal is finer than a pixel at any zoom people use, and keeps long series small. */
function n(v: number): string {
  return String(Math.round(v * 10) / 10);
}

function shapeSvg(shape: Shape): string {
  switch (shape.kind) {
    case 'line':
      return (
        `<line x1="${n(shape.x1)}" y1="${n(shape.y1)}" x2="${n(shape.x2)}" y2="${n(shape.y2)}" ` +
        `stroke="${shape.color}" stroke-width="${shape.width}"/>`
      );
    case 'polyline':
      return (
        `<polyline data-series="${escapeXml(shape.series)}" ` +
        `points="${shape.points.map(([x, y]) => `${n(x)},${n(y)}`).join(' ')}" ` +
        `fill="none" stroke="${shape.color}" stroke-width="${shape.width}" stroke-linejoin="round" ` +
        `stroke-linecap="round"/>`
      );
    case 'dot':
      return `<circle cx="${n(shape.x)}" cy="${n(shape.y)}" r="${shape.radius}" fill="${shape.color}"/>`;
    case 'text': {
      const rotate = shape.vertical ? ` transform="rotate(-90 ${n(shape.x)} ${n(shape.y)})"` : '';
      return (
        `<text x="${n(shape.x)}" y="${n(shape.y)}" font-size="${shape.size}" fill="${shape.color}" ` +
        `text-anchor="${shape.anchor}" ` +
        `dominant-baseline="central"${rotate}>${escapeXml(shape.text)}</text>`
      );
    }
  }
}

/** `id` must be unique in the page: it ties the title and description to the image for assistive technology. */
export function sceneToSvg(scene: Scene, id: string): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${scene.width} ${scene.height}" width="${scene.width}" ` +
      `height="${scene.height}" ` +
      `role="img" aria-labelledby="${id}-title ${id}-desc" font-family="system-ui, -apple-system, 'Segoe UI', ` +
      `sans-serif">`,
    `<title id="${id}-title">${escapeXml(scene.title)}</title>`,
    `<desc id="${id}-desc">${escapeXml(scene.description)}</desc>`,
    `<rect width="${scene.width}" height="${scene.height}" fill="#ffffff"/>`,
    ...scene.shapes.map(shapeSvg),
    '</svg>',
  ].join('\n');
}
