// Draws a chart scene into an RGB pixel buffer: anti-aliased strokes and dots from each pixel's distance to the
// shape, text from the bitmap font at an integer scale.
import { GLYPH_ADVANCE, GLYPH_HEIGHT, glyph } from './font.ts';
import type { Scene, Shape } from './layout.ts';

export interface Raster {
  width: number;
  height: number;
  /** width*height*3 bytes, rows top to bottom. */
  rgb: Uint8Array;
}

type Rgb = [number, number, number];

function parseColor(hex: string): Rgb {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!m) throw new Error(`colour ${JSON.stringify(hex)}: expected #rrggbb`);
  return [parseInt(m[1], 16), parseInt(m[2], 16), parseInt(m[3], 16)];
}

function distanceToSegment(px: number, py: number, ax: number, ay: number, bx: number, by: number): number {
  const dx = bx - ax;
  const dy = by - ay;
  const lengthSquared = dx * dx + dy * dy;
  const t = lengthSquared === 0 ? 0 : Math.min(1, Math.max(0, ((px - ax) * dx + (py - ay) * dy) / lengthSquared));
  return Math.hypot(px - (ax + t * dx), py - (ay + t * dy));
}

class Canvas implements Raster {
  readonly rgb: Uint8Array;
  /** Per-pixel coverage of the stroke being drawn, so that a polyline's joints are not painted twice. */
  private readonly coverage: Float32Array;

  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.rgb = new Uint8Array(width * height * 3).fill(255);
    this.coverage = new Float32Array(width * height);
  }

  blend(x: number, y: number, color: Rgb, alpha: number): void {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height || alpha <= 0) return;
    const i = (y * this.width + x) * 3;
    for (let c = 0; c < 3; c++) this.rgb[i + c] = Math.round(this.rgb[i + c] + (color[c] - this.rgb[i + c]) * alpha);
  }

  /** Paints pixels whose centre lies within width/2 of the polyline (one point: a dot), with a one-pixel soft edge. */
  stroke(points: [number, number][], width: number, color: Rgb): void {
    const radius = width / 2;
    const touched: number[] = [];
    const segments = points.length === 1 ? [[points[0], points[0]]] : points.slice(1).map((p, i) => [points[i], p]);
    for (const [[ax, ay], [bx, by]] of segments) {
      const x0 = Math.max(0, Math.floor(Math.min(ax, bx) - radius - 1));
      const x1 = Math.min(this.width - 1, Math.ceil(Math.max(ax, bx) + radius + 1));
      const y0 = Math.max(0, Math.floor(Math.min(ay, by) - radius - 1));
      const y1 = Math.min(this.height - 1, Math.ceil(Math.max(ay, by) + radius + 1));
      for (let y = y0; y <= y1; y++) {
        for (let x = x0; x <= x1; x++) {
          const cover = Math.min(1, radius + 0.5 - distanceToSegment(x + 0.5, y + 0.5, ax, ay, bx, by));
          const i = y * this.width + x;
          if (cover <= this.coverage[i]) continue;
          if (this.coverage[i] === 0) touched.push(i);
          this.coverage[i] = cover;
        }
      }
    }
    for (const i of touched) {
      this.blend(i % this.width, Math.floor(i / this.width), color, this.coverage[i]);
      this.coverage[i] = 0;
    }
  }

  text(shape: Extract<Shape, { kind: 'text' }>): void {
    const scale = Math.max(1, Math.round(shape.size / GLYPH_HEIGHT));
    const chars = [...shape.text];
    const length = chars.length * GLYPH_ADVANCE * scale - scale;
    const shift = shape.anchor === 'start' ? 0 : shape.anchor === 'middle' ? length / 2 : length;
    // Capitals span font rows 0–6: their middle, row 3.5, goes on the anchor line.
    const across = Math.round((shape.vertical ? shape.x : shape.y) - 3.5 * scale);
    const along = Math.round(shape.vertical ? shape.y + shift : shape.x - shift);
    const color = parseColor(shape.color);
    chars.forEach((char, i) => {
      for (const [gx, gy] of glyph(char)) {
        for (let sy = 0; sy < scale; sy++) {
          for (let sx = 0; sx < scale; sx++) {
            const u = (i * GLYPH_ADVANCE + gx) * scale + sx;
            const v = gy * scale + sy;
            if (shape.vertical) this.blend(across + v, along - 1 - u, color, 1);
            else this.blend(along + u, across + v, color, 1);
          }
        }
      }
    });
  }
}

export function rasterize(scene: Scene): Raster {
  const canvas = new Canvas(scene.width, scene.height);
  for (const shape of scene.shapes) {
    switch (shape.kind) {
      case 'line':
        canvas.stroke(
          [
            [shape.x1, shape.y1],
            [shape.x2, shape.y2],
          ],
          shape.width,
          parseColor(shape.color),
        );
        break;
      case 'polyline':
        canvas.stroke(shape.points, shape.width, parseColor(shape.color));
        break;
      case 'dot':
        canvas.stroke([[shape.x, shape.y]], shape.radius * 2, parseColor(shape.color));
        break;
      case 'text':
        canvas.text(shape);
        break;
    }
  }
  return canvas;
}
